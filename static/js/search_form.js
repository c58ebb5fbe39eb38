// The rollout search form (templates/explorer/_rollout_search_form.html): leave empty fields out of the
// URL, so a search's address holds only the filters it uses (and reads well when shared).
(function () {
  "use strict";
  const form = document.getElementById("rollout-search");
  if (!form) return;
  form.addEventListener("submit", function () {
    form.querySelectorAll("input, select").forEach(function (field) {
      if (field.name && field.value.trim() === "") field.disabled = true;
    });
  });
  // Back to the page (bfcache): the fields usable again.
  window.addEventListener("pageshow", function () {
    form.querySelectorAll("input, select").forEach(function (field) { field.disabled = false; });
  });
})();
