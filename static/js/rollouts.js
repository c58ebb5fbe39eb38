// The rollouts page (templates/explorer/rollouts.html). Model output is untrusted: every text goes
// into the page through textContent, never as HTML, and Plotly text (the heatmap's title, with its
// prompt id) through charts.js's plotlyText.
(function () {
  "use strict";

  // Each group's G×G similarity matrix as a heatmap: a bright block is rollouts that say the
  // same thing, the visual signature of collapse. One fixed 0–1 scale and the run page's colour
  // map, so a colour means the same similarity on every page and in every group (the map's stops
  // crowd near 1, where near-duplicates, 0.95 against 0.99, still differ). Drawn when its group is
  // first opened.
  function drawHeatmap(div) {
    if (div.dataset.drawn) return;
    div.dataset.drawn = "1";
    const z = JSON.parse(document.getElementById(div.id + "-data").textContent);
    const C = window.EvolabCharts;
    Plotly.newPlot(div, [{ z: z, type: "heatmap", zmin: 0, zmax: 1, colorscale: C.SIMILARITY_COLORSCALE,
                          hovertemplate: "rollouts %{y} and %{x}: %{z:.3f}<extra></extra>" }], {
      title: { text: C.plotlyText(div.dataset.title) }, height: 360, width: 420, margin: { t: 40, r: 10, b: 40, l: 40 },
      yaxis: { autorange: "reversed" },
    }, { displayModeBar: false });
    div.on("plotly_click", function (event) {
      const point = event.points[0];
      showPair(div, Number(point.y), Number(point.x), point.z);
    });
  }

  // Words and the spaces between them, so a diff keeps the text's own layout.
  function tokens(text) { return text.split(/(\s+)/).filter(function (t) { return t.length; }); }

  // Which tokens of a and b belong to a longest common subsequence (classic LCS table).
  function common(a, b) {
    const n = a.length, m = b.length, table = [];
    for (let i = 0; i <= n; i++) table.push(new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    const inA = new Array(n).fill(false), inB = new Array(m).fill(false);
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { inA[i++] = true; inB[j++] = true; }
      else if (table[i + 1][j] >= table[i][j + 1]) i++;
      else j++;
    }
    return [inA, inB];
  }

  function fill(pre, parts, kept) {
    pre.textContent = "";
    parts.forEach(function (part, k) {
      if (kept[k] || !part.trim()) { pre.appendChild(document.createTextNode(part)); return; }
      const mark = document.createElement("mark");
      mark.className = "diff";
      mark.textContent = part;
      pre.appendChild(mark);
    });
  }

  // A rollout's text as the page holds it (its folded row; the marks around \boxed{} add no text).
  function textOf(group, index) {
    const row = group.querySelector('tr.rollout[data-index="' + Number(index) + '"]');
    return row ? row.nextElementSibling.querySelector("pre").textContent : "";
  }

  // Two rollouts of a group side by side, the words one has and the other lacks highlighted.
  function showPair(div, i, j, similarity) {
    const group = div.closest("details.group");
    const panel = document.getElementById(div.dataset.pair);
    const left = tokens(textOf(group, i)), right = tokens(textOf(group, j));
    const kept = common(left, right);
    panel.querySelector(".pair-title").textContent =
      "Rollouts " + i + " and " + j + " (similarity " + Number(similarity).toFixed(3) + ")";
    panel.querySelector(".pair-left-title").textContent = "Rollout " + i;
    panel.querySelector(".pair-right-title").textContent = "Rollout " + j;
    fill(panel.querySelector(".pair-left"), left, kept[0]);
    fill(panel.querySelector(".pair-right"), right, kept[1]);
    panel.dataset.left = i;
    panel.dataset.right = j;
    panel.hidden = false;
    panel.scrollIntoView({ block: "nearest" });
  }

  document.querySelectorAll("button.pair-close").forEach(function (button) {
    button.addEventListener("click", function () { button.closest(".pair").hidden = true; });
  });

  document.querySelectorAll("details.group").forEach(function (group) {
    const div = group.querySelector("div.heatmap");
    if (!div) return;
    if (group.open) drawHeatmap(div);
    group.addEventListener("toggle", function () { if (group.open) drawHeatmap(div); });
  });

  function setAll(open) {
    document.querySelectorAll("details.group").forEach(function (group) { group.open = open; });
  }
  const expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
  if (expand) expand.addEventListener("click", function () { setAll(true); });
  if (collapse) collapse.addEventListener("click", function () { setAll(false); });

  // Step navigation: the slider moves the number, letting go of it shows that step.
  const slider = document.getElementById("step-slider"), input = document.getElementById("step-input");
  if (slider) {
    slider.addEventListener("input", function () { input.value = slider.value; });
    slider.addEventListener("change", function () { document.getElementById("step-nav").submit(); });
  }

  // Click a column heading to sort the group's rollouts by it (again: the other way round);
  // a missing value sorts lowest, as in the search API.
  document.querySelectorAll("table.rollouts").forEach(function (table) {
    table.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.style.cursor = "pointer";
      th.addEventListener("click", function () {
        const key = th.dataset.sort, body = table.tBodies[0], descending = th.dataset.order !== "desc";
        table.querySelectorAll("th[data-sort]").forEach(function (other) { delete other.dataset.order; });
        th.dataset.order = descending ? "desc" : "asc";
        const extra = key.startsWith("extra-") ? Number(key.slice(6)) - 1 : null;
        function value(row) {
          const text = extra === null ? row.dataset["sort" + key[0].toUpperCase() + key.slice(1)]
                                      : row.querySelectorAll("td.extra")[extra].dataset.sortValue;
          const n = parseFloat(text);
          return Number.isNaN(n) ? -Infinity : n;
        }
        const pairs = Array.from(body.querySelectorAll("tr.rollout")).map(function (row) { return [row, row.nextElementSibling]; });
        pairs.sort(function (a, b) {
          const d = value(a[0]) - value(b[0]);
          return (descending ? -d : d) || (a[0].dataset.index - b[0].dataset.index);
        });
        pairs.forEach(function (pair) { body.appendChild(pair[0]); body.appendChild(pair[1]); });
      });
    });
  });

  // Click (or Enter on) a rollout row to show or hide its full text: long texts stay folded.
  document.querySelectorAll("tr.rollout").forEach(function (row) {
    function toggle() { row.nextElementSibling.hidden = !row.nextElementSibling.hidden; }
    row.addEventListener("click", toggle);
    row.addEventListener("keydown", function (e) { if (e.key === "Enter") toggle(); });
  });
})();
