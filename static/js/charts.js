// Metric charts shared by the run page (run_live.js) and the compare page (compare.js).
//
// A Board holds one Plotly chart per metric, in collapsible sections per metric group,
// each chart with one series per key (the run page has one key, the compare page one per
// run). The controls (smoothing, log scale, step or wall-clock x-axis, hidden series) apply to
// every chart of the board and are kept in the page's address, so a link shows the same view.
// Series only grow: a point whose step the series already has is
// skipped, so live messages that race a page load or a catch-up read never draw twice.
//
// Metric names and run names come from trainer logs and users: they reach the DOM only
// through textContent, and Plotly text (titles, legends, labels) is entity-escaped.
(function () {
  "use strict";

  // Where a metric is charted comes from the server (webapp/runs/metric_groups.py::catalogue, in the
  // page's initial JSON): {groups, rules: [{group, names, prefixes}], order, rule_metrics}. A name's
  // group is the first rule it meets, else "other"; this file holds no list of metric names.
  function metricGroup(name, catalogue) {
    const rule = catalogue.rules.find(function (r) {
      return r.names.indexOf(name) >= 0 || r.prefixes.some(function (p) { return name.indexOf(p) === 0; });
    });
    return rule ? rule.group : "other";
  }

  // Display order inside a group: the catalogue's order, then alphabetical.
  function sortKey(name, catalogue) {
    const i = catalogue.order.indexOf(name);
    return (i >= 0 ? String(1000 + i) : "9999") + " " + name;
  }

  // A marker goes on the charts of its metrics (an alert's: the catalogue's rule_metrics), or on every chart.
  function marks(name, metrics) {
    return !metrics || metrics.indexOf(name) >= 0;
  }

  // D3's category10: one colour per run on the compare page.
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const SEVERITY_COLORS = { info: "#667085", warning: "#d97706", critical: "#c0362c" };

  // Similarity matrices sit near 1 in a collapsing run: most colour stops are in 0.8–1.0
  // so that 0.90 (orange) and 0.99 (dark red) look different; hover shows the value.
  const SIMILARITY_COLORSCALE = [
    [0.0, "#313695"], [0.4, "#4575b4"], [0.7, "#74add1"], [0.8, "#abd9e9"], [0.85, "#e0f3f8"],
    [0.88, "#ffffbf"], [0.91, "#fee090"], [0.94, "#fdae61"], [0.96, "#f46d43"], [0.98, "#d73027"], [1.0, "#67001f"],
  ];

  // Plotly renders a few HTML-like tags in its text; untrusted text is entity-escaped.
  function plotlyText(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function slug(name) { return name.replace(/[^a-z0-9]+/gi, "-"); }

  function ema(values, alpha) {
    const out = new Array(values.length);
    let last = null;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v === null || v === undefined || !isFinite(v)) { out[i] = null; continue; }
      last = last === null ? v : alpha * last + (1 - alpha) * v;
      out[i] = last;
    }
    return out;
  }

  function formatDuration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "—";
    seconds = Math.max(0, Math.round(seconds));
    const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600),
      m = Math.floor(seconds % 3600 / 60), s = seconds % 60;
    if (d) return d + "d " + h + "h " + m + "m";
    if (h) return h + "h " + m + "m " + s + "s";
    if (m) return m + "m " + s + "s";
    return s + "s";
  }

  // ------------------------------------------------------------------ controls

  const STORE = "evolab.chart-controls";
  // The settings are kept in the page's address as well (?smoothing=0.5&log=1&x=time&hide=12&hide=14, beside
  // the page's own parameters), so a link shows the same view; an address without them gets the settings
  // this browser used last (localStorage). `hide`: the series (compare page: run ids) hidden from every chart.
  const URL_KEYS = ["smoothing", "log", "x", "hide"];
  const DEFAULTS = { smoothing: 0, logY: false, xMode: "step", hidden: [] };

  function validSmoothing(v) { return typeof v === "number" && isFinite(v) && v >= 0 && v <= 0.99 ? v : 0; }

  function settingsFromURL() {
    const q = new URLSearchParams(location.search);
    if (!URL_KEYS.some(function (k) { return q.has(k); })) return null;
    return {
      smoothing: validSmoothing(Number(q.get("smoothing") || 0)),
      logY: q.get("log") === "1",
      xMode: q.get("x") === "time" ? "time" : "step",
      hidden: q.getAll("hide").filter(function (k) { return k !== ""; }),
    };
  }

  function settingsToURL(state) {
    const url = new URL(location.href);
    URL_KEYS.forEach(function (k) { url.searchParams.delete(k); });
    if (state.smoothing !== DEFAULTS.smoothing) url.searchParams.set("smoothing", String(state.smoothing));
    if (state.logY) url.searchParams.set("log", "1");
    if (state.xMode !== DEFAULTS.xMode) url.searchParams.set("x", state.xMode);
    state.hidden.forEach(function (k) { url.searchParams.append("hide", k); });
    // URLSearchParams encodes every comma and slash; both are plain in a query, and a link stays readable
    // (compare's runs=1,2; a hidden series like eval/pass@1)
    const query = url.searchParams.toString().replace(/%2C/gi, ",").replace(/%2F/gi, "/");
    // replaceState: a settings change is not a page of its own for the back button
    history.replaceState(history.state, "", url.pathname + (query ? "?" + query : "") + url.hash);
  }

  function Controls(root, onChange) {
    let saved = {};
    try { saved = JSON.parse(localStorage.getItem(STORE) || "{}") || {}; } catch (e) { saved = {}; }
    this.state = settingsFromURL() || {
      smoothing: validSmoothing(saved.smoothing),
      logY: saved.logY === true,
      xMode: saved.xMode === "time" ? "time" : "step",
      hidden: [],
    };
    settingsToURL(this.state);  // the address says the view from the start, settings from localStorage included
    const self = this;
    root.classList.add("chart-controls");
    root.textContent = "";

    const smoothLabel = el("label", "control");
    smoothLabel.appendChild(document.createTextNode("Smoothing "));
    const slider = el("input");
    slider.type = "range"; slider.min = "0"; slider.max = "0.99"; slider.step = "0.01";
    slider.value = String(this.state.smoothing);
    slider.className = "smoothing";
    const shown = el("output", "smoothing-value");
    shown.textContent = this.state.smoothing.toFixed(2);
    slider.addEventListener("input", function () {
      self.state.smoothing = Number(slider.value);
      shown.textContent = self.state.smoothing.toFixed(2);
      changed();
    });
    smoothLabel.appendChild(slider); smoothLabel.appendChild(shown);

    const logLabel = el("label", "control");
    const log = el("input");
    log.type = "checkbox"; log.className = "log-y"; log.checked = this.state.logY;
    log.addEventListener("change", function () { self.state.logY = log.checked; changed(); });
    logLabel.appendChild(log); logLabel.appendChild(document.createTextNode(" log y-scale"));

    const xLabel = el("label", "control");
    xLabel.appendChild(document.createTextNode("x-axis "));
    const x = el("select", "x-mode");
    [["step", "step"], ["time", "wall-clock (elapsed)"]].forEach(function (o) {
      const opt = el("option"); opt.value = o[0]; opt.textContent = o[1]; x.appendChild(opt);
    });
    x.value = this.state.xMode;
    x.addEventListener("change", function () { self.state.xMode = x.value; changed(); });
    xLabel.appendChild(x);

    const hint = el("span", "hint");
    hint.textContent = "drag to zoom · double-click to reset";
    [smoothLabel, logLabel, xLabel, hint].forEach(function (n) { root.appendChild(n); });

    function changed() {
      try {
        localStorage.setItem(STORE, JSON.stringify({ smoothing: self.state.smoothing, logY: self.state.logY,
          xMode: self.state.xMode }));
      } catch (e) { /* private mode */ }
      settingsToURL(self.state);
      onChange(self.state);
    }
    this.changed = changed;
  }

  // A legend click hides or shows a series on every chart of the board; a double click shows it alone
  // (or, when it is already alone, every series again).
  Controls.prototype.toggleSeries = function (key) {
    const i = this.state.hidden.indexOf(key);
    if (i >= 0) this.state.hidden.splice(i, 1); else this.state.hidden.push(key);
    this.changed();
  };
  Controls.prototype.isolateSeries = function (key, keys) {
    const others = keys.filter(function (k) { return k !== key; });
    const alone = this.state.hidden.indexOf(key) < 0 && others.every(function (k) { return this.state.hidden.indexOf(k) >= 0; }, this);
    this.state.hidden = alone ? [] : others;
    this.changed();
  };

  function el(tag, cls) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    return node;
  }

  // ------------------------------------------------------------------ board

  // options: {controlsRoot, series: {key: {name, color}}, legend, minSeries, catalogue (above)}
  // Boards holding more points than this draw only the charts near the viewport (see Board).
  const LAZY_DRAW_POINTS = 5000;

  function Board(root, options) {
    this.root = root;
    this.options = options || {};
    this.minSeries = this.options.minSeries || 1;
    this.series = {};        // key -> {name, color}
    this.data = {};          // metric -> key -> {steps, values, times, last}
    this.charts = {};        // metric -> div
    this.origins = {};       // key -> unix seconds of the first event
    this.stepTimes = {};     // key -> {step: time}
    this.markers = [];
    this.dirty = {};
    this.timer = null;
    this.revision = 0;       // layout.datarevision, bumped on every draw
    this.sections = {};
    this.points = 0;         // points held, all charts together
    this.inView = {};        // metric -> its chart is in (or near) the viewport
    const self = this;
    // A big board (a long run's 30 charts) draws a chart when it comes near the viewport: Plotly
    // takes tens of ms per chart, and the charts below the fold need not delay the first paint.
    this.observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        const name = e.target.dataset.metric;
        self.inView[name] = e.isIntersecting;
        if (e.isIntersecting && self.dirty[name]) self.schedule();
      });
    }, { rootMargin: "0px" }) : null;
    Object.keys(this.options.series || {}).forEach(function (k) { self.series[k] = self.options.series[k]; });
    root.classList.add("metric-board");
    if (this.options.legend) root.classList.add("with-legend");
    this.catalogue = this.options.catalogue;
    this.catalogue.groups.forEach(function (group) {
      const details = el("details", "metric-group");
      details.open = true;
      details.hidden = true;
      details.dataset.group = group;
      const summary = el("summary");
      const title = el("span", "group-title"); title.textContent = group;
      const count = el("span", "group-count");
      summary.appendChild(title); summary.appendChild(count);
      const grid = el("div", "charts");
      details.appendChild(summary); details.appendChild(grid);
      // Plotly cannot measure a chart inside a closed <details>; size it when opened.
      details.addEventListener("toggle", function () {
        if (details.open) grid.querySelectorAll(".chart").forEach(function (div) { if (div.data) Plotly.Plots.resize(div); });
      });
      root.appendChild(details);
      self.sections[group] = { details: details, grid: grid, count: count };
    });
    this.controls = new Controls(this.options.controlsRoot, function () { self.renderAll(); });
  }

  Board.prototype.setSeries = function (key, info) { this.series[key] = info; this.markDirtyAll(); };
  Board.prototype.setOrigin = function (key, time) {
    if (time !== null && time !== undefined && this.origins[key] === undefined) this.origins[key] = time;
  };
  Board.prototype.origin = function (key) {
    if (this.origins[key] !== undefined) return this.origins[key];
    // Without a recorded first event, the earliest point seen stands in for it.
    let first = null;
    const times = this.stepTimes[key] || {};
    Object.keys(times).forEach(function (s) { if (first === null || times[s] < first) first = times[s]; });
    return first;
  };

  Board.prototype.names = function () { return Object.keys(this.charts); };
  Board.prototype.lastStep = function (key) {
    let last = null;
    const times = this.stepTimes[key] || {};
    Object.keys(times).forEach(function (s) { s = Number(s); if (last === null || s > last) last = s; });
    const self = this;
    Object.keys(this.data).forEach(function (name) {
      const d = self.data[name][key];
      if (d && d.last !== -Infinity && (last === null || d.last > last)) last = d.last;
    });
    return last;
  };

  // A chart for `name` now, even before it has data (the run page's key metrics).
  Board.prototype.ensureChart = function (name) {
    if (this.charts[name]) return this.charts[name];
    const group = metricGroup(name, this.catalogue);
    const section = this.sections[group] || this.sections.other;
    const div = el("div", "chart card");
    div.id = "chart-" + slug(name);
    div.dataset.metric = name;
    div.dataset.points = "0";
    div.dataset.series = "0";
    const key = sortKey(name, this.catalogue);
    div.dataset.sort = key;
    let before = null;
    section.grid.querySelectorAll(".chart").forEach(function (other) {
      if (before === null && other.dataset.sort > key) before = other;
    });
    section.grid.insertBefore(div, before);
    if (this.observer) this.observer.observe(div);
    section.details.hidden = false;
    section.count.textContent = " (" + section.grid.children.length + ")";
    this.charts[name] = div;
    this.dirty[name] = true;
    this.schedule();
    return div;
  };

  // Append points of one series (steps ascending); returns how many were new.
  Board.prototype.add = function (name, key, steps, values, times) {
    if (!this.data[name]) this.data[name] = {};
    let d = this.data[name][key];
    if (!d) d = this.data[name][key] = { steps: [], values: [], times: [], last: -Infinity };
    if (!this.stepTimes[key]) this.stepTimes[key] = {};
    let added = 0;
    for (let i = 0; i < steps.length; i++) {
      const t = times ? times[i] : null;
      if (t !== null && t !== undefined && this.stepTimes[key][steps[i]] === undefined) this.stepTimes[key][steps[i]] = t;
      if (!(steps[i] > d.last)) continue;
      d.steps.push(steps[i]); d.values.push(values[i]); d.times.push(t === undefined ? null : t);
      d.last = steps[i];
      added++;
    }
    this.points += added;
    if (!added) return 0;
    const withData = Object.keys(this.data[name]).filter(function (k) { return this.data[name][k].steps.length; }, this);
    if (this.charts[name] || withData.length >= this.minSeries) {
      this.ensureChart(name);
      this.dirty[name] = true;
      this.schedule();
    }
    return added;
  };

  // Replace a series' points (a thinned overview by its full series, fetched on zoom).
  Board.prototype.replace = function (name, key, steps, values, times) {
    if (this.data[name] && this.data[name][key]) {
      this.points -= this.data[name][key].steps.length;
      delete this.data[name][key];
    }
    return this.add(name, key, steps, values, times);
  };

  // markers: [{key?, step, label, color, metrics: [names]|null, dash?}]
  Board.prototype.setMarkers = function (markers) { this.markers = markers.slice(); this.markDirtyAll(); };
  Board.prototype.markDirtyAll = function () {
    const self = this;
    Object.keys(this.charts).forEach(function (n) { self.dirty[n] = true; });
    this.schedule();
  };
  Board.prototype.renderAll = function () { this.markDirtyAll(); };

  Board.prototype.schedule = function () {
    if (this.timer !== null) return;
    const self = this;
    this.timer = setTimeout(function () { self.timer = null; self.flush(); }, 30);
  };

  Board.prototype.flush = function () {
    const self = this;
    const lazy = this.observer && this.points > LAZY_DRAW_POINTS;
    Object.keys(this.dirty).forEach(function (name) {
      if (lazy && !self.inView[name]) return;  // stays dirty: drawn when it scrolls near the viewport
      delete self.dirty[name];
      if (self.charts[name]) self.draw(name);
    });
  };

  Board.prototype.timeUnit = function () {
    let span = 0;
    const self = this;
    Object.keys(this.stepTimes).forEach(function (key) {
      const o = self.origin(key), times = self.stepTimes[key];
      if (o === null) return;
      Object.keys(times).forEach(function (s) { span = Math.max(span, times[s] - o); });
    });
    if (span < 600) return { div: 1, label: "elapsed (s)" };
    if (span < 36000) return { div: 60, label: "elapsed (min)" };
    return { div: 3600, label: "elapsed (h)" };
  };

  Board.prototype.markerX = function (key, step, unit, mode) {
    if (mode === "step") return step;
    const times = this.stepTimes[key] || {};
    const o = this.origin(key);
    if (times[step] === undefined || o === null) return null;
    return (times[step] - o) / unit.div;
  };

  Board.prototype.draw = function (name) {
    const div = this.charts[name];
    const state = this.controls.state;
    const unit = state.xMode === "time" ? this.timeUnit() : null;
    const traces = [];
    const self = this;
    let points = 0, seriesCount = 0;
    // the steps and values drawn: a short run's step axis gets whole steps (Plotly put ticks at 1.5, 2.5), and a
    // figure that never goes below zero gets no negative range
    let firstStep = Infinity, lastStep = -Infinity, lowest = Infinity;
    const keys = Object.keys(this.data[name] || {});
    const order = Object.keys(this.series);
    keys.sort(function (a, b) { return order.indexOf(a) - order.indexOf(b); });
    keys.forEach(function (key) {
      const d = self.data[name][key];
      if (!d.steps.length) return;
      seriesCount++;
      points += d.steps.length;
      firstStep = Math.min(firstStep, d.steps[0]);
      lastStep = Math.max(lastStep, d.steps[d.steps.length - 1]);
      d.values.forEach(function (v) { if (v !== null && v < lowest) lowest = v; });
      const info = self.series[key] || { name: key, color: PALETTE[0] };
      let x;
      if (state.xMode === "time") {
        const o = self.origin(key);
        x = d.times.map(function (t) { return t === null || o === null ? null : (t - o) / unit.div; });
      } else {
        x = d.steps;
      }
      const label = plotlyText(info.name);
      // a hidden series keeps its legend entry (greyed), which shows it again when clicked
      const visible = state.hidden.indexOf(key) >= 0 ? "legendonly" : true;
      const hover = "%{fullData.name}<br>step %{customdata}: %{y:.4g}<extra></extra>";
      if (state.smoothing > 0) {
        traces.push({ x: x, y: d.values, customdata: d.steps, type: "scatter", mode: "lines", name: label,
          legendgroup: key, showlegend: false, opacity: 0.25, visible: visible, line: { color: info.color, width: 1 }, hovertemplate: hover });
        traces.push({ x: x, y: ema(d.values, state.smoothing), customdata: d.steps, type: "scatter", mode: "lines",
          name: label, legendgroup: key, visible: visible, showlegend: !!self.options.legend, line: { color: info.color, width: 2 },
          hovertemplate: "%{fullData.name}<br>step %{customdata}: %{y:.4g} (smoothed)<extra></extra>" });
      } else {
        traces.push({ x: x, y: d.values, customdata: d.steps, type: "scatter",
          mode: d.steps.length <= 60 ? "lines+markers" : "lines", marker: { size: 4 }, name: label, legendgroup: key,
          visible: visible,
          showlegend: !!self.options.legend, line: { color: info.color, width: 1.5 }, hovertemplate: hover });
      }
    });
    const shapes = [], annotations = [];
    this.markers.forEach(function (m) {
      if (!marks(name, m.metrics)) return;
      const key = m.key || Object.keys(self.series)[0];
      const x = self.markerX(key, m.step, unit, state.xMode);
      if (x === null || x === undefined) return;
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
        line: { color: m.color || "#667085", width: 1, dash: m.dash || "dash" } });
      annotations.push({ x: x, xref: "x", y: 1, yref: "paper", yanchor: "bottom", showarrow: false,
        text: plotlyText(m.label), font: { size: 10, color: m.color || "#667085" } });
    });
    const layout = {
      title: { text: plotlyText(name), font: { size: 14 } },
      margin: { t: 44, r: 12, b: this.options.legend ? 84 : 40, l: 56 },
      autosize: true,
      showlegend: !!this.options.legend,
      legend: { orientation: "h", x: 0, y: -0.22, yanchor: "top", font: { size: 11 } },
      // autorange stated explicitly: with uirevision, an axis whose autorange is left implicit keeps
      // the range of its first draw and new steps fall off the chart; a user's zoom still wins.
      xaxis: Object.assign({ title: { text: state.xMode === "time" ? unit.label : "step", standoff: 4 }, zeroline: false,
        autorange: true }, state.xMode !== "time" && lastStep - firstStep <= 10 ? { tick0: 0, dtick: 1 } : {}),
      yaxis: { type: state.logY ? "log" : "linear", exponentformat: "power", autorange: true,
        rangemode: !state.logY && lowest >= 0 ? "nonnegative" : "normal" },
      shapes: shapes,
      annotations: annotations,
      dragmode: "zoom",
      hovermode: "closest",
      // Zoom survives live updates; changing the axes' meaning resets it.
      uirevision: state.xMode + "|" + state.logY,
      // Plotly.react compares data arrays by reference and ours grow in place: without a new
      // datarevision it keeps drawing the points it had, and live steps never appear.
      datarevision: ++this.revision,
    };
    const config = { responsive: true, displaylogo: false, doubleClick: "reset",
      modeBarButtons: [["zoom2d", "pan2d", "resetScale2d", "toImage"]] };
    Plotly.react(div, traces, layout, config);
    if (!div.dataset.legendWatched && this.options.legend) {
      // Plotly's own legend toggle would hide the series on this chart alone, until its next draw
      div.on("plotly_legendclick", function (e) {
        self.controls.toggleSeries(e.data[e.curveNumber].legendgroup);
        return false;
      });
      div.on("plotly_legenddoubleclick", function (e) {
        self.controls.isolateSeries(e.data[e.curveNumber].legendgroup, Object.keys(self.series));
        return false;
      });
      div.dataset.legendWatched = "1";
    }
    if (!div.dataset.zoomWatched && this.options.onZoom) {
      // a drag-zoom on the x axis (not a reset or a pan of the y axis) asks for full detail
      div.on("plotly_relayout", function (e) {
        if (e && e["xaxis.range[0]"] !== undefined) self.options.onZoom(name);
      });
      div.dataset.zoomWatched = "1";
    }
    div.dataset.points = String(points);
    div.dataset.series = String(seriesCount);
    div.dataset.xMode = state.xMode;
    div.dataset.logY = String(state.logY);
    div.dataset.hidden = state.hidden.join(",");
  };

  // ------------------------------------------------------------------ helpers

  function csrfToken() {
    const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error(url + " answered " + r.status);
      return r.json();
    });
  }

  // A run's socket: reconnects with backoff until stop() (a run that has ended).
  function RunSocket(runId, handlers) {
    this.runId = runId;
    this.handlers = handlers;
    this.stopped = false;
    this.retry = 500;
    this.ws = null;
    this.connect();
  }
  RunSocket.prototype.connect = function () {
    const self = this;
    if (this.stopped) return;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    // batch=1: each poll's messages in one frame ({"type": "batch", "messages": [...]})
    const ws = this.ws = new WebSocket(scheme + location.host + "/ws/runs/" + this.runId + "/?batch=1");
    ws.onopen = function () { self.retry = 500; if (self.handlers.open) self.handlers.open(); };
    ws.onmessage = function (e) {
      let m;
      try { m = JSON.parse(e.data); } catch (err) { return; }
      const messages = m.type === "batch" ? m.messages : [m];
      messages.forEach(function (one) { if (self.handlers[one.type]) self.handlers[one.type](one); });
    };
    ws.onclose = function (e) {
      if (self.handlers.close) self.handlers.close(e);
      // 4403/4404: not allowed or no such run; retrying cannot help.
      if (self.stopped || e.code === 4403 || e.code === 4404) return;
      setTimeout(function () { self.connect(); }, self.retry);
      self.retry = Math.min(self.retry * 2, 10000);
    };
  };
  RunSocket.prototype.stop = function () {
    this.stopped = true;
    if (this.ws && this.ws.readyState <= 1) this.ws.close();
  };

  window.EvolabCharts = {
    PALETTE: PALETTE,
    SEVERITY_COLORS: SEVERITY_COLORS,
    SIMILARITY_COLORSCALE: SIMILARITY_COLORSCALE,
    Board: Board,
    RunSocket: RunSocket,
    ema: ema,
    formatDuration: formatDuration,
    plotlyText: plotlyText,
    csrfToken: csrfToken,
    getJSON: getJSON,
    slug: slug,
  };
})();
