// Show only the selected method's hyperparameters; disabled fieldsets are not submitted.
(function () {
  const select = document.getElementById("method-select");
  if (!select) return;
  function update() {
    document.querySelectorAll("fieldset.hyperparameters").forEach(function (fs) {
      const on = fs.dataset.method === select.value;
      fs.hidden = !on;
      fs.disabled = !on;
    });
  }
  select.addEventListener("change", update);
  update();
})();
