// The team's alerts page: rows from the page's JSON, then live `alert` messages from
// ws/teams/{id}/ (opened, updated, acknowledged, resolved, ended with their run); a `deleted` run's rows go. Alert
// text is model- and user-derived: it is only ever set with textContent. Members tick the alerts nobody acknowledged
// (open, or ended with their run) and acknowledge them together (POST /api/teams/{id}/alerts/acknowledge, all or
// none). Which states the filter shows, and which an alert's are, the server says.
(function () {
  const table = document.getElementById("alerts-table");
  const body = table.querySelector("tbody");
  const teamId = table.dataset.team;
  const canAct = table.dataset.canAct === "1";
  const shownStates = JSON.parse(document.getElementById("alerts-shown-states").textContent);  // null: every state

  function shown(alert) {
    return shownStates === null || shownStates.indexOf(alert.state) >= 0;
  }

  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  function cell(row, text) {
    const td = document.createElement("td");
    if (text instanceof Node) td.appendChild(text); else td.textContent = text === null || text === undefined ? "" : String(text);
    row.appendChild(td);
    return td;
  }

  function render(alert) {
    let row = body.querySelector('tr[data-alert-id="' + CSS.escape(String(alert.id)) + '"]');
    if (!shown(alert)) { if (row) row.remove(); return update(); }
    const wasTicked = !!(row && row.querySelector("input.pick:checked"));
    const fresh = document.createElement("tr");
    fresh.dataset.alertId = alert.id;
    fresh.dataset.rule = alert.rule;
    fresh.dataset.state = alert.state;
    fresh.dataset.run = alert.run;
    fresh.className = "alert-row severity-" + alert.severity + " state-" + alert.state;
    if (canAct) {
      const pick = cell(fresh, "");
      if (alert.needs_acknowledgement) {
        const box = document.createElement("input");
        box.type = "checkbox";
        box.className = "pick";
        box.value = alert.id;
        box.checked = wasTicked;  // a live update of a ticked row keeps it ticked
        box.setAttribute("aria-label", "Select alert " + alert.id);
        box.addEventListener("change", updateBulk);
        pick.appendChild(box);
      }
    }
    const sev = document.createElement("span");
    sev.className = "badge severity-" + alert.severity;
    sev.textContent = alert.severity;
    cell(fresh, sev);
    cell(fresh, alert.rule);
    const link = document.createElement("a");
    link.href = "/runs/" + alert.run + "/";
    link.textContent = (alert.run_name || "run") + " #" + alert.run;
    cell(fresh, link);
    cell(fresh, alert.step === null ? "—" : alert.step + (alert.last_step !== alert.step && alert.last_step !== null ? " → " + alert.last_step : ""));
    cell(fresh, alert.message);
    cell(fresh, alert.state_label);
    cell(fresh, EvolabTime.element(alert.updated_at));
    const actions = cell(fresh, "");
    if (canAct && alert.needs_acknowledgement) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary acknowledge";
      button.textContent = "Acknowledge";
      button.addEventListener("click", function () {
        button.disabled = true;
        fetch("/api/alerts/" + alert.id + "/acknowledge", {
          method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrf() },
        }).then(function (r) { return r.json(); }).then(render).catch(function () { button.disabled = false; });
      });
      actions.appendChild(button);
    }
    if (row) row.replaceWith(fresh); else body.insertBefore(fresh, body.firstChild);
    update();
  }

  function update() {
    document.getElementById("no-alerts").hidden = body.children.length > 0;
    updateBulk();
  }

  const bulkButton = document.getElementById("acknowledge-selected");
  const selectAll = document.getElementById("select-all");
  const bulkError = document.getElementById("bulk-error");

  function ticked() { return Array.from(body.querySelectorAll("input.pick:checked")); }

  function updateBulk() {
    if (!bulkButton) return;
    const n = ticked().length;
    const all = body.querySelectorAll("input.pick").length;
    bulkButton.disabled = n === 0;
    bulkButton.textContent = n ? "Acknowledge selected (" + n + ")" : "Acknowledge selected";
    selectAll.checked = all > 0 && n === all;
    selectAll.indeterminate = n > 0 && n < all;
  }

  if (bulkButton) {
    selectAll.addEventListener("change", function () {
      body.querySelectorAll("input.pick").forEach(function (box) { box.checked = selectAll.checked; });
      updateBulk();
    });
    bulkButton.addEventListener("click", function () {
      const ids = ticked().map(function (box) { return Number(box.value); });
      if (!ids.length) return;
      bulkButton.disabled = true;
      bulkError.hidden = true;
      fetch("/api/teams/" + teamId + "/alerts/acknowledge", {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRFToken": csrf(), "Content-Type": "application/json" },
        body: JSON.stringify({ ids: ids }),
      }).then(function (r) {
        return r.json().then(function (data) {
          if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
          data.alerts.forEach(render);
        });
      }).catch(function (err) {
        // e.g. one of them resolved meanwhile: nothing was acknowledged, the server says which
        bulkError.textContent = String(err.message || err);
        bulkError.hidden = false;
      }).then(updateBulk);
    });
  }

  JSON.parse(document.getElementById("alerts-initial").textContent).slice().reverse().forEach(render);
  update();

  let retry = 500;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws/teams/" + teamId + "/");
    const indicator = document.getElementById("live-indicator");
    ws.onopen = function () { indicator.textContent = "live"; indicator.className = "live on"; retry = 500; };
    ws.onmessage = function (e) {
      const m = JSON.parse(e.data);
      if (m.type === "alert") render(m);
      else if (m.type === "deleted") {  // a run deleted with its alerts
        body.querySelectorAll('tr[data-run="' + CSS.escape(String(m.id)) + '"]').forEach(function (row) { row.remove(); });
        update();
      }
    };
    ws.onclose = function () {
      indicator.textContent = "not live"; indicator.className = "live off";
      setTimeout(connect, retry); retry = Math.min(retry * 2, 10000);
    };
  }
  connect();
})();
