// The run page: draw what the database held at page load, then apply live messages
// from ws/runs/{id}/ (DESIGN §2 step 5). A point for a step the chart already has is
// skipped, so a message that races the page load never draws a point twice.
(function () {
  const initial = JSON.parse(document.getElementById("run-initial").textContent);
  const runId = initial.run.id;
  const charts = document.getElementById("charts");
  const lastStep = {};
  const TERMINAL = ["succeeded", "failed", "cancelled"];

  function slug(name) { return name.replace(/[^a-z0-9]+/gi, "-"); }

  function ensureChart(name) {
    const id = "chart-" + slug(name);
    let div = document.getElementById(id);
    if (div) return div;
    div = document.createElement("div");
    div.id = id;
    div.className = "chart card";
    div.dataset.metric = name;
    charts.appendChild(div);
    Plotly.newPlot(div, [{ x: [], y: [], mode: "lines+markers", name: name }], {
      title: { text: name }, margin: { t: 40, r: 10, b: 40, l: 50 }, autosize: true,
      xaxis: { title: { text: "step" } },
    }, { displayModeBar: false, responsive: true });
    lastStep[name] = -Infinity;
    return div;
  }

  function addPoints(name, steps, values) {
    const div = ensureChart(name);
    const xs = [], ys = [];
    for (let i = 0; i < steps.length; i++) {
      if (steps[i] > lastStep[name]) { xs.push(steps[i]); ys.push(values[i]); lastStep[name] = steps[i]; }
    }
    if (xs.length) Plotly.extendTraces(div, { x: [xs], y: [ys] }, [0]);
    div.dataset.points = String(div.data[0].x.length);
  }

  initial.chart_metrics.forEach(ensureChart);
  Object.keys(initial.metrics).forEach(function (name) {
    if (initial.chart_metrics.indexOf(name) >= 0 || name.indexOf("eval/") === 0) {
      addPoints(name, initial.metrics[name].steps, initial.metrics[name].values);
    }
  });

  function setState(state, message) {
    const badge = document.getElementById("run-state");
    badge.textContent = state;
    badge.className = "state state-" + state;
    if (message !== undefined) {
      const m = document.getElementById("run-message");
      m.textContent = message || "";
      m.className = state === "failed" ? "error" : "";
    }
    const terminal = TERMINAL.indexOf(state) >= 0;
    document.getElementById("cancel-form").hidden = terminal;
    document.getElementById("resume-form").hidden = !(state === "cancelled" || state === "failed");
  }

  function addStepLink(step) {
    const p = document.getElementById("step-links");
    if (p.querySelector('[data-step="' + step + '"]')) return;
    if (!p.querySelector("a")) p.textContent = "";
    const a = document.createElement("a");
    a.href = document.getElementById("rollouts-link").getAttribute("href") + "?step=" + step;
    a.textContent = String(step);
    a.dataset.step = String(step);
    p.appendChild(a);
    p.appendChild(document.createTextNode(" "));
  }

  // R-Zero stages: one line per (iteration, phase), updated as its state changes.
  function showStage(stage) {
    document.getElementById("stages-card").hidden = false;
    const key = stage.iteration + "-" + stage.phase;
    let li = document.querySelector('#stages li[data-key="' + key + '"]');
    if (!li) {
      li = document.createElement("li");
      li.dataset.key = key;
      document.getElementById("stages").appendChild(li);
    }
    const details = Object.keys(stage).filter(function (k) { return ["type", "iteration", "phase", "state", "step"].indexOf(k) < 0; })
      .map(function (k) { return k + " " + JSON.stringify(stage[k]); }).join(", ");
    li.textContent = "Iteration " + stage.iteration + " · " + stage.phase + ": " + stage.state + (details ? " (" + details + ")" : "");
  }
  (initial.stages || []).forEach(showStage);

  const handlers = {
    stage: showStage,
    metrics: function (m) {
      document.getElementById("run-step").textContent = m.step;
      Object.keys(m.values).forEach(function (name) {
        if (initial.chart_metrics.indexOf(name) >= 0 || name.indexOf("eval/") === 0) addPoints(name, [m.step], [m.values[name]]);
      });
    },
    group: function (m) { addStepLink(m.step); },
    status: function (m) { if (m.source !== "trainer" || TERMINAL.indexOf(m.state) < 0) setState(m.state, m.message); },
    alert: function () {},
  };

  // Whatever was written between the page render and the socket opening (or while it
  // was closed) is read back from the API once the socket is open.
  function catchUp() {
    fetch("/api/runs/" + runId + "/metrics", { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (data) {
      Object.keys(data.metrics || {}).forEach(function (name) {
        if (initial.chart_metrics.indexOf(name) >= 0 || name.indexOf("eval/") === 0) addPoints(name, data.metrics[name].steps, data.metrics[name].values);
      });
    });
    fetch("/api/runs/" + runId, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (run) {
      setState(run.state, run.message);
      if (run.last_step !== null) document.getElementById("run-step").textContent = run.last_step;
    });
  }

  let retry = 500;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws/runs/" + runId + "/");
    const indicator = document.getElementById("live-indicator");
    ws.onopen = function () {
      indicator.textContent = "live"; indicator.className = "live on"; retry = 500;
      catchUp();
    };
    ws.onmessage = function (e) {
      const m = JSON.parse(e.data);
      if (handlers[m.type]) handlers[m.type](m);
    };
    ws.onclose = function () {
      indicator.textContent = "not live"; indicator.className = "live off";
      // Reconnect unless the run has ended; a reload brings back anything missed meanwhile.
      if (TERMINAL.indexOf(document.getElementById("run-state").textContent) < 0) {
        setTimeout(connect, retry);
        retry = Math.min(retry * 2, 10000);
      }
    };
  }
  connect();
})();
