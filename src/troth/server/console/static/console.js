// Keeps a running execution's page current: while it may still change (data-live="true"),
// fetch its live part again every second and swap it in when it changed (so the aria-live
// region announces changes, not ticks). The fragment is the server's own escaped markup.
// Without this script the page is complete: reload it.
"use strict";
(function () {
  const section = document.getElementById("live");
  if (!section) return;
  let last = null;
  const opened = () => new Set([...section.querySelectorAll("details[open]")]
    .map((d) => d.closest("[data-id]")?.dataset.id));
  async function refresh() {
    const live = section.querySelector("[data-live]");
    if (!live || live.dataset.live !== "true") return;
    try {
      const response = await fetch(section.dataset.src, { credentials: "same-origin" });
      const text = await response.text();
      if (response.ok && text !== last) {
        const kept = opened();
        section.innerHTML = text;
        last = text;
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
