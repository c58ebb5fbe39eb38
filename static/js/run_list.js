// The run list, live: one socket per team shown (ws/teams/{id}/). A `run` message updates
// its row (state, step, health figures); an `alert` message updates the row's count of
// current alerts (the message says whether it is one); a `deleted` run's row goes. A run without a row (just launched) or one that leaves the state filter
// makes the table body reload from the server, which applies the filters.
// Everything from the server is set with textContent: run names and messages are user text.
(function () {
  "use strict";
  const configElement = document.getElementById("run-list-config");
  const table = document.getElementById("runs");
  if (!configElement || !table) return;
  const config = JSON.parse(configElement.textContent);
  const SEVERITY_RANK = { info: 0, warning: 1, critical: 2 };
  const indicator = document.getElementById("live-indicator");
  const compareForm = document.getElementById("compare-form");
  const compareButton = document.getElementById("compare-button");
  const decimals = {};
  config.health.forEach(function (h) { decimals[h.name] = h.decimals; });

  function rowOf(runId) {
    return table.querySelector('tr[data-run-id="' + String(Number(runId)) + '"]');
  }

  function formatNumber(value, places) {
    if (value === null || value === undefined || !isFinite(value)) return "—";
    return Number(value).toFixed(places);
  }

  // Runs without a row, with the state they had when the table was last asked for them:
  // a run the filters leave out is asked about again only when its state changes, not at
  // every step it logs.
  const absent = {};

  // The row's progress bar: steps logged of the total (a <progress>, whose value screen readers announce).
  function setProgress(bar, last, total) {
    if (!bar) return;
    const planned = Number(total);
    bar.hidden = !(planned > 0);
    if (bar.hidden) return;
    const done = Math.max(0, Math.min(planned, Number(last) || 0));
    bar.max = planned;
    bar.value = done;
    bar.textContent = Math.round(100 * done / planned) + "%";
  }

  function applyRun(message) {
    const row = rowOf(message.id);
    // what a row's presence depends on: the state filter and whether the list includes archived runs
    const seen = message.state + (message.archived ? " archived" : "");
    if (!row) {
      if (absent[message.id] === seen) return;
      absent[message.id] = seen;
      scheduleReload();
      return;
    }
    if ((config.state_filter && message.state !== config.state_filter) ||
        (message.archived === true && !config.archived_filter)) {
      absent[message.id] = seen;
      scheduleReload();
      return;
    }
    if (typeof message.archived === "boolean" &&
        message.archived !== Boolean(row.querySelector('[data-field="archived"]'))) {
      scheduleReload();  // archived or back while the list includes archived runs: the server renders the mark
      return;
    }
    delete absent[message.id];
    const state = row.querySelector('[data-field="state"]');
    // a run that starts or ends moves the queued runs behind it: their places are the server's to word
    if (state && message.state && state.textContent !== message.state &&
        document.querySelector('#runs [data-field="queue-place"]:not(:empty)')) scheduleReload();
    if (state && message.state) {
      state.textContent = message.state;
      state.className = "state state-" + message.state;
      if (message.state !== "queued") {
        const notice = row.querySelector(".no-worker");
        if (notice) notice.remove();
      }
      // waiting in a cluster engine's queue: the engine's reason, beside the state
      const reason = row.querySelector('[data-field="engine-reason"]');
      if (reason) reason.textContent = message.state === "pending" ? (message.engine_reason || "") : "";
    }
    const step = row.querySelector('[data-field="step"]');
    if (step) {
      const last = message.last_step === null || message.last_step === undefined ? "—" : String(message.last_step);
      const total = message.total_steps === undefined ? row.dataset.totalSteps : message.total_steps;
      step.textContent = last + " / " + (total === null || total === "" ? "—" : total);
      setProgress(row.querySelector('[data-field="progress"]'), message.last_step, total);
    }
    const name = row.querySelector(".run-name");
    if (name && typeof message.name === "string") name.textContent = message.name;
    if (message.health) {
      Object.keys(decimals).forEach(function (metric) {
        if (!(metric in message.health)) return;
        const cell = row.querySelector('[data-health="' + CSS.escape(String(metric)) + '"]');
        if (cell) cell.textContent = formatNumber(message.health[metric], decimals[metric]);
      });
    }
    row.dataset.updated = String(Date.now());
  }

  // A run deleted (by anyone, anywhere): its row goes, ticked or not.
  function dropRun(runId) {
    const row = rowOf(runId);
    delete absent[runId];
    if (!row) return;
    row.remove();
    updateCompare();
  }

  function applyAlert(message) {
    const row = rowOf(message.run);
    if (!row) return;
    let alerts = {};
    try { alerts = JSON.parse(row.dataset.alerts || "{}"); } catch (e) { alerts = {}; }
    if (message.current) alerts[String(message.id)] = message.severity;
    else delete alerts[String(message.id)];
    row.dataset.alerts = JSON.stringify(alerts);
    renderAlerts(row, alerts);
  }

  function renderAlerts(row, alerts) {
    const cell = row.querySelector('[data-field="alerts"]');
    if (!cell) return;
    const severities = Object.keys(alerts).map(function (k) { return alerts[k]; });
    cell.textContent = "";
    if (!severities.length) {
      const dash = document.createElement("span");
      dash.className = "hint";
      dash.textContent = "—";
      cell.appendChild(dash);
      return;
    }
    const worst = severities.reduce(function (a, b) { return (SEVERITY_RANK[b] || 0) > (SEVERITY_RANK[a] || 0) ? b : a; });
    const link = document.createElement("a");
    const runLink = row.querySelector(".run-name");
    link.href = (runLink ? runLink.getAttribute("href") : "#") + "#alerts";
    link.className = "alert-count severity-" + worst;
    link.title = severities.length + " current alert" + (severities.length === 1 ? "" : "s") + ", worst " + worst;
    const badge = document.createElement("span");
    badge.className = "badge severity-" + worst;
    badge.textContent = String(severities.length);
    link.appendChild(badge);
    cell.appendChild(link);
  }

  // --- reloading the table body (new runs, runs leaving the filter, reconnects) ---
  let reloadTimer = null;
  function scheduleReload() {
    if (reloadTimer) return;
    reloadTimer = setTimeout(function () { reloadTimer = null; reload(); }, 300);
  }

  function reload() {
    const params = new URLSearchParams(window.location.search);
    params.set("fragment", "1");
    fetch(window.location.pathname + "?" + params.toString(), { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { if (!response.ok) throw new Error(String(response.status)); return response.text(); })
      .then(function (html) {
        const checked = selectedIds();
        const holder = document.createElement("table");
        holder.innerHTML = html;  // our own server-rendered, autoescaped fragment
        const body = holder.querySelector("tbody");
        const old = table.querySelector("tbody");
        if (body && old) old.replaceWith(body);
        table.querySelectorAll("input.run-select").forEach(function (box) { box.checked = checked.indexOf(box.value) >= 0; });
        updateCompare();
        table.dataset.reloads = String(Number(table.dataset.reloads || 0) + 1);
      })
      .catch(function () { /* the next message or reconnect tries again */ });
  }

  // --- compare ---
  function selectedIds() {
    return Array.prototype.map.call(table.querySelectorAll("input.run-select:checked"), function (box) { return box.value; });
  }

  function updateCompare() {
    if (!compareButton) return;
    const n = selectedIds().length;
    compareButton.disabled = n < 2;
    compareButton.textContent = n >= 2 ? "Compare " + n + " runs" : "Compare";
  }

  table.addEventListener("change", function (event) {
    if (event.target.classList && event.target.classList.contains("run-select")) updateCompare();
  });
  if (compareForm) {
    compareForm.addEventListener("submit", function (event) {
      event.preventDefault();
      const ids = selectedIds();
      if (ids.length < 2) return;
      window.location.href = compareForm.getAttribute("action") + "?runs=" + ids.map(encodeURIComponent).join(",");
    });
  }
  updateCompare();

  // --- sockets ---
  const open = {};
  function setIndicator() {
    if (!indicator) return;
    const ids = Object.keys(open);
    const live = ids.length > 0 && ids.every(function (k) { return open[k]; });
    indicator.textContent = live ? "live" : "not live";
    indicator.className = "live " + (live ? "on" : "off");
  }

  function connect(teamId, delay, reconnecting) {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + window.location.host + "/ws/teams/" + teamId + "/");
    open[teamId] = false;
    socket.onopen = function () {
      open[teamId] = true;
      setIndicator();
      if (reconnecting) reload();  // catch up on what was missed while disconnected
    };
    socket.onmessage = function (event) {
      let message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      if (message.type === "run") applyRun(message);
      else if (message.type === "alert") applyAlert(message);
      else if (message.type === "deleted") dropRun(message.id);
    };
    socket.onclose = function (event) {
      open[teamId] = false;
      setIndicator();
      if (event.code === 4401 || event.code === 4404) return;  // signed out, or no longer in the team
      const next = Math.min((delay || 1000) * 2, 30000);
      setTimeout(function () { connect(teamId, next, true); }, delay || 1000);
    };
  }

  config.teams.forEach(function (teamId) { connect(teamId, 1000, false); });
  setIndicator();
})();
