"""Type hints decode or pass through: whatever a function is annotated with, its arguments
and results come back as the hint says when that can be built, as the plain JSON value
when it cannot, and a value that plainly contradicts a checkable hint fails loudly."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, Optional, TypedDict, TypeVar

import msgspec
import pydantic
import pytest

from troth.sdk import Context, Troth
from troth.sdk.codec import Codec, convert, parameter_hints


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Size:
    w: int
    h: int


class Struct(msgspec.Struct):
    name: str
    tags: list[str] = []


class Model(pydantic.BaseModel):
    name: str
    age: int


class Order(TypedDict):
    sku: str
    qty: int


class Plain:
    """A class msgspec cannot build: its value passes through as plain JSON."""

    def __init__(self, anything: object) -> None:
        self.anything = anything


@dataclasses.dataclass
class Holder:
    point: Point
    plain: Plain


T = TypeVar("T")


@pytest.mark.parametrize(
    ("obj", "hint", "expected"),
    [
        ({"a": [1, "x"]}, object, {"a": [1, "x"]}),
        ({"a": 1}, Any, {"a": 1}),
        (5, int | str, 5),
        ("five", int | str, "five"),
        (None, Optional[Point], None),  # noqa: UP045 - the spelling under test
        ({"x": 1, "y": 2}, Optional[Point], Point(1, 2)),  # noqa: UP045
        ({"x": 1, "y": 2}, Point | None, Point(1, 2)),
        ([{"x": 1, "y": 2}], list[Point], [Point(1, 2)]),
        ({"a": {"x": 1, "y": 2}}, dict[str, Point], {"a": Point(1, 2)}),
        ("b", Literal["a", "b"], "b"),
        ({"sku": "s1", "qty": 2}, Order, {"sku": "s1", "qty": 2}),
        ({"name": "n", "tags": ["t"]}, Struct, Struct("n", ["t"])),
        ({"name": "ana", "age": 7}, Model, Model(name="ana", age=7)),
        ([{"name": "ana", "age": 7}], list[Model], [Model(name="ana", age=7)]),
        # Unions msgspec refuses: each member is tried in order.
        ({"w": 3, "h": 4}, Point | Size, Size(3, 4)),
        ({"x": 1, "y": 2}, Point | Size, Point(1, 2)),
        ([{"w": 3, "h": 4}, {"x": 1, "y": 2}], list[Point | Size], [Size(3, 4), Point(1, 2)]),
        ({"k": {"w": 3, "h": 4}}, dict[str, Point | Size], {"k": Size(3, 4)}),
        ({"name": "ana", "age": 7}, Point | Model, Model(name="ana", age=7)),
        ({"x": 1}, tuple[Point | Size, ...], {"x": 1}),  # not a list: passes through
        # Unknown annotations: the plain JSON value.
        ({"anything": 1}, Plain, {"anything": 1}),
        ([{"anything": 1}], list[Plain], [{"anything": 1}]),
        (
            {"point": {"x": 1, "y": 2}, "plain": {"anything": 1}},
            Holder,
            Holder(Point(1, 2), {"anything": 1}),  # type: ignore[arg-type]
        ),
        ({"a": 1}, T, {"a": 1}),
        ({"a": 1}, "NameThatDoesNotExist", {"a": 1}),
        (None, int, None),
    ],
)
def test_hints_decode_or_pass_through(obj: Any, hint: Any, expected: Any) -> None:
    codec = Codec()
    assert convert(codec.decode(codec.encode(obj)), hint) == expected


@pytest.mark.parametrize(
    ("obj", "hint", "named"),
    [
        ("abc", int, "int"),
        ("c", Literal["a", "b"], "Literal"),
        (["x"], list[int], "list[int]"),
        ({"x": 1}, Point, "Point"),  # a required field is missing
        ({"z": 1}, Point | Size, "Point | "),  # no member fits
        ({"name": "ana", "age": "old"}, Model, "Model"),
    ],
)
def test_a_value_that_contradicts_a_checkable_hint_fails_naming_the_hint(
    obj: Any, hint: Any, named: str
) -> None:
    with pytest.raises(msgspec.ValidationError, match="type hint") as raised:
        convert(obj, hint)
    assert named in str(raised.value)


def with_one_unresolvable(point: Point, other: NameThatDoesNotExist) -> Size:  # type: ignore[name-defined]  # noqa: F821
    return Size(point.x, point.y)


def test_one_unresolvable_annotation_leaves_the_others_resolved() -> None:
    params, returned = parameter_hints(with_one_unresolvable)
    assert [(name, hint) for name, _, hint in params] == [
        ("point", Point),
        ("other", "NameThatDoesNotExist"),
    ]
    assert returned is Size
    assert convert({"x": 1, "y": 2}, params[0][2]) == Point(1, 2)
    assert convert({"a": 1}, params[1][2]) == {"a": 1}


# -- end to end, embedded and against troth serve ---------------------------------------------


def order_total(order: Order, prices: dict[str, int]) -> int:
    assert isinstance(order, dict)
    return order["qty"] * prices[order["sku"]]


async def checkout(ctx: Context, order: Order, prices: dict[str, int]) -> object:
    total = await ctx.run(order_total, order, prices)
    return {"sku": order["sku"], "total": total}


@pytest.mark.anyio
async def test_a_workflow_returning_object_with_a_typed_dict_step_runs(
    make_app: Callable[..., Troth], uid: str
) -> None:
    app = make_app()
    app.register(checkout)
    async with app:
        order: Order = {"sku": "s1", "qty": 3}
        handle = app.run(f"{uid}-checkout", checkout, order, {"s1": 5})
        assert await handle.result() == {"sku": "s1", "total": 15}
        by_rpc = app.rpc(f"{uid}-checkout-rpc", checkout, order, {"s1": 2})
        assert await by_rpc.result() == {"sku": "s1", "total": 6}
