// The compare page: every metric at least two of the runs log, overlaid (one colour per
// run), with the run page's grouping and controls (charts.js). Runs still going are
// followed live: one socket per run, closed when that run ends.
(function () {
  "use strict";
  const C = window.EvolabCharts;
  const initial = JSON.parse(document.getElementById("compare-initial").textContent);
  const runs = initial.runs;

  const series = {};
  runs.forEach(function (r, i) {
    const color = C.PALETTE[i % C.PALETTE.length];
    series[String(r.id)] = { name: r.name + " #" + r.id, color: color };
    document.querySelectorAll('.swatch[data-run="' + CSS.escape(String(r.id)) + '"]').forEach(function (s) { s.style.background = color; });
  });

  const TERMINAL = initial.terminal_states;  // the run states that end a run (Run.TERMINAL)
  const board = new C.Board(document.getElementById("charts"), {
    controlsRoot: document.getElementById("chart-controls"),
    series: series,
    legend: true,
    catalogue: initial.metric_catalogue,
    minSeries: Math.min(2, runs.length),
  });
  runs.forEach(function (r) {
    const key = String(r.id);
    board.setOrigin(key, r.time_origin);
    const metrics = initial.metrics[key] || {};
    Object.keys(metrics).forEach(function (name) {
      const s = metrics[name];
      board.add(name, key, s.steps, s.values, s.times);
    });
  });

  function noteShared() {
    document.getElementById("no-shared").hidden = board.names().length > 0;
  }
  noteShared();

  // Hyperparameter table: show only the rows where the runs differ.
  const only = document.getElementById("only-differing");
  only.addEventListener("change", function () {
    document.getElementById("hp-diff").classList.toggle("only-differing", only.checked);
  });

  function setText(id, text) { const n = document.getElementById(id); if (n) n.textContent = text; }

  function setState(runId, state) {
    const badge = document.getElementById("state-" + runId);
    if (badge) { badge.textContent = state; badge.className = "state state-" + state + " run-state"; }
  }

  function follow(r) {
    const key = String(r.id);
    let socket = null;
    let lastStep = r.last_step;
    function live(on) {
      const n = document.getElementById("live-" + r.id);
      if (n) { n.textContent = on ? "live" : "not live"; n.className = "live " + (on ? "on" : "off"); }
    }
    function ended(state) {
      setState(r.id, state);
      if (socket) socket.stop();
      live(false);
    }
    function catchUp() {
      const last = board.lastStep(key);
      const since = last === null ? "" : "?since_step=" + (last - 1);
      C.getJSON("/api/runs/" + r.id + "/metrics" + since).then(function (data) {
        Object.keys(data.metrics || {}).forEach(function (name) {
          const s = data.metrics[name];
          board.add(name, key, s.steps, s.values, s.times);
        });
        noteShared();
      }).catch(function () {});
      C.getJSON("/api/runs/" + r.id).then(function (run) {
        if (run.last_step !== null) setText("step-" + r.id, String(run.last_step));
        if (TERMINAL.indexOf(run.state) >= 0) ended(run.state); else setState(r.id, run.state);
      }).catch(function () {});
    }
    socket = new C.RunSocket(r.id, {
      open: function () { live(true); catchUp(); },
      close: function () { live(false); },
      metrics: function (m) {
        if (lastStep === null || m.step > lastStep) { lastStep = m.step; setText("step-" + r.id, String(m.step)); }
        Object.keys(m.values).forEach(function (name) { board.add(name, key, [m.step], [m.values[name]], [m.time]); });
        noteShared();
      },
      status: function (m) {
        if (TERMINAL.indexOf(m.state) >= 0) ended(m.state); else setState(r.id, m.state);
      },
    });
  }
  runs.forEach(function (r) { if (TERMINAL.indexOf(r.state) < 0) follow(r); });
})();
