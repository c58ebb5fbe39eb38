// The launch form: show only the selected method's hyperparameters (disabled fieldsets are
// not submitted), fill fields from a preset, keep the prompt-set and eval-set selects to
// the chosen team, and move the alert table to the team's thresholds where untouched.
// Names come from the server as JSON and are set with textContent, never as HTML.
(function () {
  "use strict";
  const form = document.getElementById("run-form");
  const configElement = document.getElementById("run-form-config");
  const methodSelect = document.getElementById("method-select");
  // the server renders the select with its default method chosen: the script never names one
  if (!form || !configElement || !methodSelect) return;
  const config = JSON.parse(configElement.textContent);
  const teamSelect = document.getElementById("team-select");
  const promptSetSelect = document.getElementById("prompt-set-select");
  const evalSelect = document.getElementById("eval-set-select");
  const modelInput = form.querySelector("input[name=model]");
  const maxStepsInput = form.querySelector("input[name=max_steps]");
  const gpusInput = form.querySelector("input[name=gpus]");
  const presetInput = document.getElementById("preset-input");
  const presetHint = document.getElementById("preset-hint");
  // A fresh form follows the model's preset until the user edits a hyperparameter.
  let followModel = Boolean(config.fresh);

  function method() { return methodSelect.value; }

  function showMethod() {
    const selected = method();
    form.querySelectorAll("fieldset.hyperparameters").forEach(function (fs) {
      const on = fs.dataset.method === selected;
      fs.hidden = !on;
      fs.disabled = !on;
    });
    form.querySelectorAll(".method-info").forEach(function (info) { info.hidden = info.dataset.method !== selected; });
  }

  function field(name) {
    return form.querySelector('[name="' + CSS.escape("hp-" + method() + "-" + name) + '"]');
  }

  function setValue(input, value) {
    if (!input) return;
    if (input.type === "checkbox") input.checked = Boolean(value);
    else input.value = value === null || value === undefined ? "" : String(value);
  }

  function applyPreset(key) {
    const byMethod = config.presets[method()] || {};
    const preset = byMethod[key];
    if (!preset) return;
    Object.keys(preset.hyperparameters).forEach(function (name) { setValue(field(name), preset.hyperparameters[name]); });
    if (preset.max_steps !== null && preset.max_steps !== undefined && maxStepsInput) maxStepsInput.value = String(preset.max_steps);
    markPreset(key);
  }

  function markPreset(key) {
    if (presetInput) presetInput.value = key || "";
    form.querySelectorAll("button.preset").forEach(function (button) {
      button.setAttribute("aria-pressed", button.dataset.preset === key ? "true" : "false");
    });
    if (presetHint) {
      const button = form.querySelector('button.preset[data-preset="' + CSS.escape(String(key)) + '"]');
      presetHint.textContent = button ? button.title : "";
    }
  }

  // The server's rule (presets.default_preset): the small preset for a small model on a CPU queue.
  function defaultPreset() {
    const rule = config.default_preset;
    const model = (modelInput ? modelInput.value.trim() : "") || "default";
    const gpus = gpusInput ? Number(gpusInput.value || 0) : 0;
    return rule.models.indexOf(model) >= 0 && !gpus ? rule.on_cpu : rule.otherwise;
  }

  form.querySelectorAll("button.preset").forEach(function (button) {
    button.addEventListener("click", function () {
      applyPreset(button.dataset.preset);
      followModel = false;
    });
  });

  // Editing a hyperparameter by hand: the form no longer is "the preset".
  form.addEventListener("input", function (event) {
    const name = event.target.name || "";
    if (name.indexOf("hp-") === 0) {
      followModel = false;
      markPreset("");
    }
  });
  form.addEventListener("change", function (event) {
    const name = event.target.name || "";
    if (name.indexOf("hp-") === 0 && (event.target.type === "checkbox" || event.target.tagName === "SELECT")) {
      followModel = false;
      markPreset("");
    }
  });

  methodSelect.addEventListener("change", function () {
    showMethod();
    // The new method's fields take the preset the form is on (its own values for it).
    const current = presetInput ? presetInput.value : "";
    if (current) applyPreset(current);
  });
  [modelInput, gpusInput].forEach(function (input) {
    if (input) input.addEventListener("change", function () { if (followModel) applyPreset(defaultPreset()); });
  });

  // --- team → prompt sets, eval sets, alert thresholds ---
  function fillSelect(select, sets, emptyLabel, describe) {
    if (!select) return;
    const keep = select.value;
    select.textContent = "";
    const empty = document.createElement("option");
    empty.value = "";
    empty.textContent = emptyLabel;
    select.appendChild(empty);
    sets.forEach(function (set) {
      const option = document.createElement("option");
      option.value = String(set.id);
      option.textContent = describe(set);
      if (String(set.id) === keep) option.selected = true;
      select.appendChild(option);
    });
  }

  function updateTeam(previousTeam) {
    if (!teamSelect) return;
    const team = Number(teamSelect.value);
    const sets = config.prompt_sets.filter(function (s) { return s.team === team; });
    fillSelect(promptSetSelect, sets, "—", function (s) {
      return s.name + " (" + s.row_count + " rows" + (s.has_labels ? ", labelled" : "") + ")";
    });
    fillSelect(evalSelect, sets.filter(function (s) { return s.has_labels; }), "none", function (s) {
      return s.name + " (" + s.row_count + " rows)";
    });
    const before = config.team_thresholds[String(previousTeam)];
    const after = config.team_thresholds[String(team)];
    if (!after) return;
    form.querySelectorAll("#section-alerts [name^='alert-']").forEach(function (input) {
      const parts = input.name.split("-");  // alert-KIND-PARAM (kinds and params use underscores)
      const kind = parts[1], param = parts.slice(2).join("-");
      if (!after[kind] || !(param in after[kind])) return;
      const untouched = input.type === "checkbox" ? input.checked === Boolean(before && before[kind][param])
        : (!before || String(input.value) === String(before[kind][param]));
      input.dataset.default = String(after[kind][param]);
      if (untouched) setValue(input, after[kind][param]);
    });
  }

  if (teamSelect) {
    let previousTeam = teamSelect.value;
    teamSelect.addEventListener("change", function () {
      updateTeam(previousTeam);
      previousTeam = teamSelect.value;
    });
  }

  showMethod();
  markPreset(config.preset);
  if (config.error_key) {
    const summary = document.getElementById("run-error");
    if (summary) summary.focus();
  }
})();
