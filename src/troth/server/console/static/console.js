// Keeps a running execution's page current: while it may still change (data-live="true"),
// ask for its live part every second. The server answers 304 while nothing changed (its
// ETag), so an idle execution costs a read and a hash, and the aria-live region announces
// changes, not ticks. The fragment is the server's own escaped markup. Without this script
// the page is complete: reload it.
"use strict";
(function () {
  const section = document.getElementById("live");
  if (!section) return;
  let etag = section.dataset.etag || null;
  const opened = () => new Set([...section.querySelectorAll("details[open]")]
    .map((d) => d.closest("[data-id]")?.dataset.id));
  async function refresh() {
    const live = section.querySelector("[data-live]");
    if (!live || live.dataset.live !== "true") return;
    try {
      const headers = etag ? { "If-None-Match": etag } : {};
      const response = await fetch(section.dataset.src, { credentials: "same-origin", headers });
      if (response.status === 200) {
        const kept = opened();
        section.innerHTML = await response.text();
        etag = response.headers.get("ETag");
        for (const node of section.querySelectorAll("[data-id]")) {
          const details = node.querySelector(":scope > details");
          if (details && kept.has(node.dataset.id)) details.open = true;
        }
      }
    } catch (e) {
      // Unreachable for now: the next tick tries again.
    }
    setTimeout(refresh, 1000);
  }
  setTimeout(refresh, 1000);
})();
