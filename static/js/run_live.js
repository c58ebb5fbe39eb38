// The run page: draw what the database held at page load, then apply live messages
// from ws/runs/{id}/ (DESIGN §2 step 5). Charts come from charts.js (shared with the
// compare page); a point for a step a chart already has is skipped, so a message that
// races the page load never draws a point twice. Model output, prompt ids, metric and
// run names are untrusted: they reach the page through textContent only.
(function () {
  "use strict";
  const C = window.EvolabCharts;
  const initial = JSON.parse(document.getElementById("run-initial").textContent);
  const run = initial.run;
  const TERMINAL = initial.terminal_states;  // the run states that end a run (Run.TERMINAL)
  const runId = run.id;
  const KEY = "run";

  // ------------------------------------------------------------------ charts

  const board = new C.Board(document.getElementById("charts"), {
    controlsRoot: document.getElementById("chart-controls"),
    series: { run: { name: run.name + " #" + runId, color: "#3559e0" } },
    legend: false,
    catalogue: initial.metric_catalogue,
    onZoom: fullDetail,
  });
  // Series the page opened thinned (min/max buckets): zooming into one reads its every point once.
  const thinned = {};
  (initial.thinned || []).forEach(function (n) { thinned[n] = true; });
  function fullDetail(name) {
    if (!thinned[name]) return;
    delete thinned[name];
    C.getJSON("/api/runs/" + runId + "/metrics?names=" + encodeURIComponent(name)).then(function (data) {
      const s = (data.metrics || {})[name];
      if (s) board.replace(name, KEY, s.steps, s.values, s.times);
    }).catch(function () { thinned[name] = true; });
  }
  board.setOrigin(KEY, initial.time_origin);
  // While a run can still log, its key metrics get a chart, filled as steps arrive; before its first step the
  // page says it waits for it instead of showing empty axes.
  const waiting = document.getElementById("charts-waiting");
  function chartsUp() {
    if (waiting.dataset.up) return;
    waiting.dataset.up = "1";
    waiting.hidden = true;
    if (TERMINAL.indexOf(run.state) < 0) initial.chart_metrics.forEach(function (n) { board.ensureChart(n); });
  }
  if (Object.keys(initial.metrics).length || TERMINAL.indexOf(run.state) >= 0) chartsUp(); else waiting.hidden = false;
  Object.keys(initial.metrics).forEach(function (name) {
    const s = initial.metrics[name];
    board.add(name, KEY, s.steps, s.values, s.times);
  });

  // Markers: resumes and alerts, redrawn whenever either changes.
  const resumes = (initial.resumes || []).slice();
  const alerts = {};

  function redrawMarkers() {
    const markers = resumes.filter(function (r) { return r.step !== null && r.step !== undefined; }).map(function (r) {
      return { key: KEY, step: r.step, label: "resumed", color: "#8a5a00", dash: "dot", metrics: null };
    });
    Object.keys(alerts).forEach(function (id) {
      const a = alerts[id];
      if (a.step === null || a.step === undefined) return;
      markers.push({ key: KEY, step: a.step, label: a.rule, color: C.SEVERITY_COLORS[a.severity] || "#667085",
        dash: "dash", metrics: initial.metric_catalogue.rule_metrics[a.rule] || null, alert: a.id });
    });
    board.setMarkers(markers);
    document.getElementById("charts").dataset.markers = String(markers.length);
  }

  // ------------------------------------------------------------------ alerts panel

  const alertList = document.getElementById("alerts");
  const canAct = !!initial.can_act;
  // unacknowledged first, then the rest of the current ones (acknowledged), then the past (resolved, closed)
  function rank(a) { return a.needs_acknowledgement ? 0 : a.current ? 1 : 2; }

  function renderAlert(a) {
    let li = alertList.querySelector('li[data-alert-id="' + CSS.escape(String(a.id)) + '"]');
    if (!li) {
      li = document.createElement("li");
      li.dataset.alertId = String(a.id);
    }
    const severity = ["info", "warning", "critical"].indexOf(a.severity) >= 0 ? a.severity : "warning";
    li.className = "alert " + severity + " state-" + (a.state || "open");
    li.dataset.rule = a.rule;
    li.dataset.state = a.state;
    li.dataset.step = a.step === null ? "" : String(a.step);
    li.textContent = "";
    const sev = document.createElement("span"); sev.className = "severity"; sev.textContent = a.severity;
    const rule = document.createElement("strong"); rule.className = "rule"; rule.textContent = a.rule;
    const where = document.createElement("span"); where.className = "where";
    where.textContent = a.step === null || a.step === undefined ? "" :
      " at step " + a.step + (a.last_step !== null && a.last_step !== undefined && a.last_step !== a.step ? " (last seen at step " + a.last_step + ")" : "");
    const msg = document.createElement("span"); msg.className = "message"; msg.textContent = a.message || "";
    const state = document.createElement("span"); state.className = "alert-state"; state.textContent = a.state_label || a.state;
    [sev, document.createTextNode(" "), rule, where, document.createTextNode(" — "), msg, document.createTextNode(" "), state]
      .forEach(function (n) { li.appendChild(n); });
    if (a.needs_acknowledgement && canAct) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary acknowledge";
      button.textContent = "Acknowledge";
      button.addEventListener("click", function () { acknowledge(a.id, button); });
      li.appendChild(document.createTextNode(" "));
      li.appendChild(button);
    }
    return li;
  }

  // The banner of Evolab's own work failing on the run: its processing_failed alert's message while it is current
  // (at most one is: the rule has one active alert per run).
  const failing = {};
  function showFailure(a) {
    if (a.rule !== initial.processing_failed_rule) return;
    if (a.current) failing[a.id] = a.message || ""; else delete failing[a.id];
    const ids = Object.keys(failing);
    document.getElementById("processing-failed").hidden = ids.length === 0;
    if (ids.length) document.getElementById("processing-failed-message").textContent = failing[ids[ids.length - 1]];
  }

  // The collapse forecast: "collapse expected around step N (A–B at 80%)" while its alert is active, as the server
  // says it (webapp/runs/queries.py::collapse_forecast). An alert message of its rule reads it back (readLiveState).
  function showForecast(f) {
    document.getElementById("collapse-forecast").hidden = !f;
    document.getElementById("collapse-forecast-text").textContent = f ? f.text : "";
  }

  function showAlert(a) {
    alerts[a.id] = a;
    showFailure(a);
    renderAlert(a);
    const items = Object.keys(alerts).map(function (id) { return alerts[id]; });
    items.sort(function (x, y) {
      return (rank(x) - rank(y)) || ((y.step || 0) - (x.step || 0)) || (y.id - x.id);
    });
    items.forEach(function (item) {
      alertList.appendChild(alertList.querySelector('li[data-alert-id="' + CSS.escape(String(item.id)) + '"]') || renderAlert(item));
    });
    const unacknowledged = items.filter(function (i) { return i.needs_acknowledgement; }).length;
    document.getElementById("alerts-empty").hidden = items.length > 0;
    document.getElementById("alerts-count").textContent = unacknowledged ? "(" + unacknowledged + " not acknowledged)" : "";
    redrawMarkers();
  }

  function acknowledge(id, button) {
    button.disabled = true;
    fetch("/api/alerts/" + id + "/acknowledge", {
      method: "POST", credentials: "same-origin",
      headers: { "X-CSRFToken": C.csrfToken(), "Content-Type": "application/json", Accept: "application/json" },
      body: "{}",
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) { return { ok: r.ok, body: body }; });
    }).then(function (res) {
      if (res.ok && res.body.id !== undefined) showAlert(res.body);
      else { button.disabled = false; flash(res.body.error || "could not acknowledge the alert"); }
    }).catch(function () { button.disabled = false; flash("could not reach the server"); });
  }

  function flash(text) {
    const p = document.getElementById("alerts-error");
    p.textContent = text;
    p.hidden = false;
  }

  (initial.alerts || []).forEach(showAlert);
  redrawMarkers();
  showForecast(initial.forecast);

  function refreshAlerts() {
    C.getJSON("/api/runs/" + runId + "/alerts").then(function (data) {
      (data.alerts || []).forEach(showAlert);
    }).catch(function () { /* alerts API unavailable: the panel keeps what it has */ });
  }

  // ------------------------------------------------------------------ similarity heatmap

  const heat = {
    step: initial.heatmap ? initial.heatmap.step : null,
    groups: {},    // prompt id -> {prompt_id, majority_answer, similarity}
    order: [],
    preferred: null,
  };
  const heatCard = document.getElementById("heatmap-card");
  const picker = document.getElementById("heatmap-prompt");
  const heatDiv = document.getElementById("heatmap");

  function addGroup(g) {
    if (!Array.isArray(g.similarity) || !g.similarity.length) return false;
    if (heat.step === null || g.step > heat.step) {
      heat.step = g.step; heat.groups = {}; heat.order = [];
    } else if (g.step < heat.step) {
      return false;
    }
    const id = String(g.prompt_id);
    if (!heat.groups[id]) heat.order.push(id);
    heat.groups[id] = { prompt_id: id, majority_answer: g.majority_answer, similarity: g.similarity };
    return true;
  }

  function drawHeatmap() {
    if (heat.step === null || !heat.order.length) { heatCard.hidden = true; return; }
    heatCard.hidden = false;
    document.getElementById("heatmap-step").textContent = String(heat.step);
    // The picker lists this step's prompts; the chosen prompt stays chosen when present.
    const chosen = heat.preferred !== null && heat.groups[heat.preferred] ? heat.preferred : heat.order[0];
    const current = Array.prototype.map.call(picker.options, function (o) { return o.value; });
    if (current.join("\u0000") !== heat.order.join("\u0000")) {
      picker.textContent = "";
      heat.order.forEach(function (id) {
        const opt = document.createElement("option");
        opt.value = id; opt.textContent = id;
        picker.appendChild(opt);
      });
    }
    picker.value = chosen;
    const g = heat.groups[chosen];
    document.getElementById("heatmap-majority").textContent = g.majority_answer === null || g.majority_answer === undefined ? "none" : String(g.majority_answer);
    const n = g.similarity.length;
    const idx = []; for (let i = 0; i < n; i++) idx.push(i);
    Plotly.react(heatDiv, [{
      z: g.similarity, x: idx, y: idx, type: "heatmap", zmin: 0, zmax: 1, colorscale: C.SIMILARITY_COLORSCALE,
      colorbar: { title: { text: "similarity" }, tickvals: [0, 0.5, 0.8, 0.9, 0.95, 1], thickness: 14 },
      hovertemplate: "rollout %{y} × rollout %{x}<br>similarity %{z:.3f}<extra></extra>",
      xgap: n <= 32 ? 1 : 0, ygap: n <= 32 ? 1 : 0,
    }], {
      margin: { t: 10, r: 10, b: 40, l: 44 }, height: 380,
      // the rollouts' own range on both axes, the square kept by shrinking the plot (constrain: "domain"), never by
      // padding the range (a narrow window's axis ran from -6 to 21 for 16 rollouts)
      xaxis: { title: { text: "rollout" }, range: [-0.5, n - 0.5], constrain: "domain", dtick: n <= 16 ? 1 : undefined, showgrid: false },
      yaxis: { title: { text: "rollout" }, range: [n - 0.5, -0.5], scaleanchor: "x", constrain: "domain", dtick: n <= 16 ? 1 : undefined, showgrid: false },
    }, { displaylogo: false, responsive: true, modeBarButtons: [["toImage"]] });
    heatDiv.dataset.prompt = chosen;
    heatDiv.dataset.step = String(heat.step);
  }

  picker.addEventListener("change", function () { heat.preferred = picker.value; drawHeatmap(); });
  ((initial.heatmap || {}).groups || []).forEach(function (g) {
    addGroup({ step: initial.heatmap.step, prompt_id: g.prompt_id, majority_answer: g.majority_answer, similarity: g.similarity });
  });
  drawHeatmap();

  // ------------------------------------------------------------------ run facts

  let state = run.state;
  let lastStep = run.last_step;
  // The server's one definition of the run's times (Run.clock_json), on load and in every status message:
  // when a worker first took it, and elapsed = the training time it had ended plus the stretch under way.
  let clock = run;

  function setText(id, text) { const n = document.getElementById(id); if (n) n.textContent = text; }

  // A moment as every page shows one (static/js/when.js); redrawn only when it changes
  function setWhen(id, iso) {
    const n = document.getElementById(id);
    if (!n || n.dataset.iso === String(iso)) return;
    n.dataset.iso = String(iso);
    n.replaceChildren(iso ? EvolabTime.element(iso, { seconds: true }) : document.createTextNode("—"));
  }

  // The step shown and the progress bar beside it (step / total steps).
  function showStep(step) {
    setText("run-step", String(step));
    const bar = document.querySelector('[data-field="progress"]');
    if (!bar || !run.total_steps) return;
    bar.value = Math.max(0, Math.min(run.total_steps, step));
    bar.textContent = Math.round(100 * bar.value / run.total_steps) + "%";
  }

  // ETA from the step rate of the recent steps since the last resume.
  function eta() {
    // a run trained elsewhere may not say how many steps it plans
    if (state !== "running" || lastStep === null || lastStep === undefined || !run.total_steps) return null;
    const times = board.stepTimes[KEY] || {};
    const since = resumes.length ? (resumes[resumes.length - 1].step || -Infinity) : -Infinity;
    const steps = Object.keys(times).map(Number).filter(function (s) { return s > since; }).sort(function (a, b) { return a - b; });
    const recent = steps.slice(-20);
    if (recent.length < 2) return null;
    const first = recent[0], last = recent[recent.length - 1];
    const seconds = times[last] - times[first];
    if (!(seconds > 0)) return null;
    const remaining = run.total_steps - lastStep;
    return remaining <= 0 ? 0 : remaining * seconds / (last - first);
  }

  function tick() {
    setWhen("started-at", clock.started_at || null);
    setWhen("finished-at", TERMINAL.indexOf(state) >= 0 && clock.finished_at ? clock.finished_at : null);
    const since = clock.training_since ? Date.parse(clock.training_since) : null;
    const seconds = (clock.trained_seconds || 0) + (since === null ? 0 : Math.max(0, Date.now() - since) / 1000);
    setText("elapsed", clock.started_at ? C.formatDuration(seconds) : "—");
    const e = eta();
    setText("eta", e === null ? "—" : (e === 0 ? "finishing" : "~" + C.formatDuration(e)));
  }
  tick();
  setInterval(function () { if (TERMINAL.indexOf(state) < 0) tick(); }, 1000);

  function setState(newState, message) {
    state = newState;
    const badge = document.getElementById("run-state");
    badge.textContent = newState;
    badge.className = "state state-" + newState;
    if (message !== undefined) {
      const m = document.getElementById("run-message");
      m.textContent = message || "";
      m.className = newState === "failed" ? "error" : "";
    }
    const terminal = TERMINAL.indexOf(newState) >= 0;
    const cancel = document.getElementById("cancel-form");
    if (cancel) cancel.hidden = terminal;
    const resume = document.getElementById("resume-form");
    if (resume) resume.hidden = !(newState === "cancelled" || newState === "failed");
    // A worker took the run: the "no worker listens" notice no longer applies.
    const noWorker = document.getElementById("no-worker");
    if (noWorker && newState !== "queued") noWorker.hidden = true;
    if (newState !== "queued") showQueuePlace(null);
    if (terminal) endLive();
    tick();
  }

  // The cluster engine's job (DESIGN §4.9): its id, the engine's word on it, the tail of its log.
  function showEngine(e) {
    const box = document.getElementById("engine-job");
    if (!box || !e || !e.title) return;
    box.hidden = false;
    setText("engine-title", e.title);
    setText("engine-job-id", e.job_id || "being submitted");
    setText("engine-reason", e.reason || "");
    if (typeof e.log_tail === "string") {
      setText("engine-log-tail", e.log_tail);
      document.getElementById("engine-log").hidden = !e.log_tail;
    }
  }

  // A queued run's place in its worker queue, as the server words it (webapp/runs/queue_place.py).
  function showQueuePlace(place) {
    const box = document.getElementById("queue-place");
    if (!box) return;
    box.textContent = place ? place.text : "";
    box.hidden = document.getElementById("queue-place-label").hidden = !place;
  }
  // read again while the run waits: the runs in front of it start and end without its own socket hearing of it
  setInterval(function () {
    if (state === "queued") C.getJSON("/api/runs/" + runId).then(applyRun).catch(function () {});
  }, 10000);

  function applyRun(r) {
    showEngine(r.engine);
    if ("queue_place" in r) showQueuePlace(r.queue_place);
    if ("trained_seconds" in r) clock = r;
    // the highest step logged, as the metrics handler keeps it: a status read before the latest step was
    // stored may arrive after that step's metrics
    if (r.last_step !== null && (lastStep === null || r.last_step > lastStep)) {
      lastStep = r.last_step;
      showStep(r.last_step);
    }
    setState(r.state, r.message);
  }

  // Steps with rollouts: a link per step, in step order. The steps linked are kept in a set, so a read of every
  // step (readLiveState) adds the missing ones without searching the page's links once per step of a long run.
  const stepLinks = document.getElementById("step-links");
  const linkedSteps = new Set(Array.prototype.map.call(stepLinks.querySelectorAll("a[data-step]"),
    function (a) { return Number(a.dataset.step); }));
  let lastLinked = Array.from(linkedSteps).reduce(function (a, b) { return Math.max(a, b); }, -Infinity);

  // Puts `link` among the container's links in the order of their data-`key` numbers, then a space: a link read
  // back after missed messages may come before ones that arrived live. One above `last` (the highest there) is
  // appended without a search.
  function insertInOrder(container, link, key, last) {
    const value = Number(link.dataset[key]);
    const later = value > last ? null : Array.prototype.find.call(container.querySelectorAll("a[data-" + key + "]"),
      function (x) { return Number(x.dataset[key]) > value; });
    container.insertBefore(link, later || null);
    container.insertBefore(document.createTextNode(" "), later || null);
  }

  function addStepLink(step) {
    if (linkedSteps.has(step)) return;
    if (!linkedSteps.size) stepLinks.textContent = "";  // "none yet"
    const a = document.createElement("a");
    a.href = document.getElementById("rollouts-link").getAttribute("href") + "?step=" + step;
    a.textContent = String(step);
    a.dataset.step = String(step);
    insertInOrder(stepLinks, a, "step", lastLinked);
    linkedSteps.add(step);
    lastLinked = Math.max(lastLinked, step);
  }

  // R-Zero stages: one line per (iteration, phase), updated as its state changes.
  function showStage(stage) {
    document.getElementById("stages-card").hidden = false;
    const key = stage.iteration + "-" + stage.phase;
    let li = document.querySelector('#stages li[data-key="' + CSS.escape(key) + '"]');
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
  // Stage events the page has shown: a line changes with each, so a read of them all (readLiveState) is newer
  // than the page only when it holds more; one answered before a stage message that arrived since would undo it.
  let stagesShown = (initial.stages || []).length;

  // R-Zero question sets: a link per iteration, added when its set is ingested (`questions` messages).
  function addIterationLink(m) {
    const p = document.getElementById("iteration-links");
    if (!p || p.querySelector('[data-iteration="' + CSS.escape(String(m.iteration)) + '"]')) return;
    document.getElementById("stages-card").hidden = false;
    const a = document.createElement("a");
    a.href = p.dataset.href + "?iteration=" + m.iteration;
    a.textContent = "Iteration " + m.iteration + " questions";
    a.dataset.iteration = String(m.iteration);
    insertInOrder(p, a, "iteration", Infinity);  // a few links: always searched
  }

  // ------------------------------------------------------------------ what live messages add, read back

  // The parts of the page only live messages grow (step links, heatmap, R-Zero's stages and question sets,
  // resume markers), read back when this page may have missed some of those messages: told `behind`, or a
  // socket opening (after the render, or again after a drop). The API gives them as the page's initial JSON has
  // them (webapp/runs/queries.py::live_state); what the page has already is kept, nothing is shown twice.
  let liveStateAsked = 0;  // the forecast is replaced, not added to: only the latest read's counts
  function readLiveState() {
    const asked = ++liveStateAsked;
    C.getJSON("/api/runs/" + runId + "/live-state").then(function (s) {
      applyLiveState(s, asked === liveStateAsked);
    }).catch(function () { /* keep what we have */ });
  }

  function applyLiveState(s, latest) {
    (s.steps || []).forEach(addStepLink);
    // The heatmap: the API's step replaces an older one's groups; at the step shown its groups are set over the
    // page's, so a group of that step that arrived live after the API's read is kept. The chosen prompt stays
    // chosen when the step has it (drawHeatmap).
    const h = s.heatmap || {};
    let drawn = false;
    (h.groups || []).forEach(function (g) {
      drawn = addGroup({ step: h.step, prompt_id: g.prompt_id, majority_answer: g.majority_answer,
        similarity: g.similarity }) || drawn;
    });
    if (drawn) drawHeatmap();
    // in the order they were logged: a stage's line ends with its latest state
    if ((s.stages || []).length > stagesShown) {
      s.stages.forEach(showStage);
      stagesShown = s.stages.length;
    }
    (s.iterations || []).forEach(function (k) { addIterationLink({ iteration: k }); });
    if (latest && "forecast" in s) showForecast(s.forecast);
    // a resume is its trainer's `running` event: its time tells one the page has from one it lacks
    const known = new Set(resumes.map(function (r) { return r.time; }));
    const missing = (s.resumes || []).filter(function (r) { return !known.has(r.time); });
    if (missing.length) {
      missing.forEach(function (r) { resumes.push({ step: r.step, time: r.time }); });
      resumes.sort(function (a, b) { return a.time - b.time; });  // eta() reads the latest resume last
      redrawMarkers();
    }
  }

  // ------------------------------------------------------------------ live

  const indicator = document.getElementById("live-indicator");
  let socket = null;

  function endLive() {
    if (socket) { socket.stop(); socket = null; }
    indicator.textContent = "not live";
    indicator.className = "live off";
    indicator.dataset.ended = "true";  // closed for good: a stopped socket never reconnects
  }

  const handlers = {
    stage: function (m) { stagesShown += 1; showStage(m); },
    questions: addIterationLink,
    metrics: function (m) {
      // A step beyond the next one means messages were lost while the socket stayed open (Redis
      // restarting drops pushes): the missing steps, this one with them, are read from the API
      // instead (the board appends only steps after its last).
      const had = board.lastStep(KEY);
      if (lastStep === null || m.step > lastStep) { lastStep = m.step; showStep(m.step); }
      if (had !== null && m.step > had + 1) { catchUp(had); return; }
      chartsUp();
      Object.keys(m.values).forEach(function (name) { board.add(name, KEY, [m.step], [m.values[name]], [m.time]); });
      tick();
    },
    group: function (m) { addStepLink(m.step); if (addGroup(m)) drawHeatmap(); },
    engine: showEngine,
    // The run's one word on its state, from its lifecycle: the run's row (state, message, times, step), as
    // the API gives it, with the history row that caused it.
    status: function (m) {
      if (m.transition) { liveTransitions.push(m.transition); addTransition(m.transition); }
      applyRun(m);
    },
    // A trainer started again: the marker goes at the step it had logged before (the server says which).
    resume: function (m) {
      resumes.push({ step: m.step, time: m.time });
      redrawMarkers();
    },
    alert: function (m) {
      showAlert(m);
      if (m.rule === initial.forecast_rule) readLiveState();  // opened, updated, resolved or ended: ask the server
    },
    // The server read the run's live stream too late and some messages were gone before this socket got
    // them (webapp/live.py): what they said is in the database, read back now; the notice says so.
    behind: function () {
      catchUp();
      readHistory();
      readLiveState();
      const notice = document.getElementById("live-notice");
      notice.textContent = "Some live updates were missed at " + EvolabTime.format(new Date(), true) +
        "; the page was read again from the server.";
      notice.hidden = false;
    },
    open: function () {
      indicator.textContent = "live"; indicator.className = "live on";
      catchUp();
      readHistory();
      readLiveState();
    },
    close: function () { indicator.textContent = "not live"; indicator.className = "live off"; },
  };

  // The run's history: rendered by the server, read again whenever the socket opens (a change made between the
  // render and the socket, a worker claiming the run just launched, sent its message to nobody) or is told it
  // fell behind, and grown by the `transition` of each status message after that.
  function historyRow(t) {
    const tr = document.createElement("tr");
    tr.dataset.transitionId = String(t.id);
    // "running → queued": the state before the change and after it (one state where it stayed, as a cancel request
    // leaves a running run running, and on the run's first row)
    const state = document.createDocumentFragment();
    [t.previous_state, t.state].forEach(function (s, i) {
      if (!s || (i === 0 && s === t.state)) return;
      const badge = document.createElement("span");
      badge.className = "state state-" + s;
      badge.textContent = s;
      state.appendChild(badge);
      if (i === 0) state.appendChild(document.createTextNode(" → "));
    });
    const by = t.by ? t.by : (t.worker ? "worker " + t.worker : "");
    [EvolabTime.element(t.at, { seconds: true }), state, t.cause_title, by, t.message].forEach(function (value) {
      const td = document.createElement("td");
      if (typeof value === "string") td.textContent = value; else td.appendChild(value);
      tr.appendChild(td);
    });
    return tr;
  }

  const liveTransitions = [];  // received since the page loaded: re-added after a read of the history

  function addTransition(t) {
    const rows = document.getElementById("history-rows");
    if (rows.querySelector('tr[data-transition-id="' + t.id + '"]')) return;
    rows.insertBefore(historyRow(t), rows.firstChild);
  }

  function readHistory() {
    const rows = document.getElementById("history-rows");
    C.getJSON("/api/runs/" + runId + "/transitions?limit=" + rows.dataset.limit).then(function (data) {
      const fresh = document.createDocumentFragment();
      data.results.forEach(function (t) { fresh.appendChild(historyRow(t)); });
      rows.replaceChildren(fresh);
      liveTransitions.forEach(addTransition);  // one that arrived while the read was under way
    }).catch(function () { /* keep the rows we have */ });
  }

  // Whatever was written between the page render and the socket opening (or while it
  // was closed) is read back from the API once the socket is open.
  function catchUp(after) {
    const last = after === undefined ? board.lastStep(KEY) : after;
    const since = last === null ? "" : "?since_step=" + (last - 1);
    C.getJSON("/api/runs/" + runId + "/metrics" + since).then(function (data) {
      if (Object.keys(data.metrics || {}).length) chartsUp();
      Object.keys(data.metrics || {}).forEach(function (name) {
        const s = data.metrics[name];
        board.add(name, KEY, s.steps, s.values, s.times);
      });
      tick();
    }).catch(function () {});
    C.getJSON("/api/runs/" + runId).then(applyRun).catch(function () {});
    refreshAlerts();
  }

  if (TERMINAL.indexOf(state) < 0) socket = new C.RunSocket(runId, handlers);
  window.evolabRunPage = { board: board, heat: heat };
})();
