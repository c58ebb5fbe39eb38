// A team's alert settings: the deliveries table follows the team's socket (ws/teams/{id}/). A
// `webhook_deliveries` message says only that a delivery was queued or tried; the table is read again
// from the server (its rows hold webhook URLs, which a member's socket never carries), one read at a
// time, the last change always read.
(function () {
  "use strict";
  const script = document.getElementById("team-settings-script");
  const rows = document.getElementById("delivery-rows");
  if (!script || !rows) return;
  const teamId = script.dataset.team;
  const indicator = document.getElementById("live-indicator");
  let reading = false, again = false;

  function reread() {
    if (reading) { again = true; return; }
    reading = true;
    fetch(window.location.pathname + "?part=deliveries", {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (html) {
        // the server's rendering of the same template, escaped there
        const holder = document.createElement("table");
        holder.innerHTML = html;
        const fresh = holder.querySelector("#delivery-rows");
        if (fresh) document.getElementById("delivery-rows").replaceWith(fresh);
      })
      .catch(function () { /* the next message or reconnection reads again */ })
      .then(function () {
        reading = false;
        if (again) { again = false; reread(); }
      });
  }

  let retry = 500;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws/teams/" + teamId + "/");
    ws.onopen = function () {
      indicator.textContent = "live"; indicator.className = "live on"; retry = 500;
      reread();  // what changed between the page's rendering (or the last socket's close) and now
    };
    ws.onmessage = function (e) {
      let m;
      try { m = JSON.parse(e.data); } catch (err) { return; }
      if (m.type === "webhook_deliveries") reread();
    };
    ws.onclose = function (event) {
      indicator.textContent = "not live"; indicator.className = "live off";
      if (event.code === 4401 || event.code === 4404) return;  // signed out, or no longer in the team
      setTimeout(connect, retry); retry = Math.min(retry * 2, 10000);
    };
  }
  connect();
})();
