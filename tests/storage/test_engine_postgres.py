"""Every engine behaviour test again, against PostgreSQL: the ``machine`` fixture of this
package's conftest hands them a ``PostgresService``."""

from tests.engine.test_promises import *  # noqa: F403
from tests.engine.test_schedules import *  # noqa: F403
from tests.engine.test_search import *  # noqa: F403
from tests.engine.test_settlement import *  # noqa: F403
from tests.engine.test_tasks import *  # noqa: F403
from tests.engine.test_timeouts import *  # noqa: F403
