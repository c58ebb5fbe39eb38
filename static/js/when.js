// One rendering of a moment on every page (webapp/times.py writes <time class="when" datetime="...Z">, in UTC):
// here it becomes the reader's local time with its zone, the full time in both zones on hover, and, with
// data-relative, how long ago. Scripts that draw times make the same element with EvolabTime.element(iso).
(function () {
  "use strict";
  function pad(n) { return String(n).padStart(2, "0"); }

  function zoneName(date) {
    try {
      const part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(date)
        .find(function (p) { return p.type === "timeZoneName"; });
      if (part) return part.value;
    } catch (e) { /* an old browser: the offset below */ }
    const minutes = -date.getTimezoneOffset();
    return "UTC" + (minutes >= 0 ? "+" : "-") + pad(Math.floor(Math.abs(minutes) / 60)) + ":" + pad(Math.abs(minutes) % 60);
  }

  // 2026-11-29 16:20 GMT+1 (with seconds: 16:20:33)
  function format(date, seconds) {
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) + " " +
      pad(date.getHours()) + ":" + pad(date.getMinutes()) + (seconds ? ":" + pad(date.getSeconds()) : "") +
      " " + zoneName(date);
  }

  function full(date) {
    return format(date, true) + " (" + date.toISOString().slice(0, 19).replace("T", " ") + " UTC)";
  }

  // 5 min ago, 3 h ago, 2 days ago; past a week the date itself
  function relative(date) {
    const seconds = (Date.now() - date.getTime()) / 1000;
    if (seconds < 0 || seconds >= 7 * 86400) return format(date, false);
    if (seconds < 60) return "just now";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
    if (seconds < 86400) return Math.floor(seconds / 3600) + " h ago";
    const days = Math.floor(seconds / 86400);
    return days + (days === 1 ? " day ago" : " days ago");
  }

  function show(el) {
    const date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) return;
    el.textContent = el.hasAttribute("data-relative") ? relative(date) : format(date, el.hasAttribute("data-seconds"));
    el.title = full(date);
  }

  // <time> for an ISO moment: options.seconds, options.relative
  function element(iso, options) {
    const el = document.createElement("time");
    el.className = "when";
    el.setAttribute("datetime", iso);
    if (options && options.seconds) el.setAttribute("data-seconds", "");
    if (options && options.relative) el.setAttribute("data-relative", "");
    el.textContent = iso;
    show(el);
    return el;
  }

  function localize(root) {
    if (root.matches && root.matches("time.when")) show(root);
    if (root.querySelectorAll) root.querySelectorAll("time.when").forEach(show);
  }

  window.EvolabTime = { element: element, format: format };
  localize(document);
  // rows the pages re-read from the server (the run list, the deliveries table) arrive in UTC too
  new MutationObserver(function (changes) {
    changes.forEach(function (change) { change.addedNodes.forEach(localize); });
  }).observe(document.body, { childList: true, subtree: true });
  setInterval(function () { document.querySelectorAll("time.when[data-relative]").forEach(show); }, 30000);
})();
