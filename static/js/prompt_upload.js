// A large prompt file parsed by a worker: follow GET /api/prompt-uploads/{id} until the set is saved
// (then open it) or the file is refused (then show why). Texts go in with textContent: the error
// quotes the file.
(function () {
  "use strict";
  const card = document.getElementById("upload");
  if (!card) return;
  const id = card.dataset.id;
  const els = {
    state: document.getElementById("upload-state"),
    rows: document.getElementById("upload-rows"),
    bar: document.getElementById("upload-progress"),
    hint: document.getElementById("upload-hint"),
    error: document.getElementById("upload-error"),
  };
  const HINTS = {
    queued: "Waiting for a worker to read the file.",
    parsing: "A worker is checking every row.",
    saving: "Saving the prompts.",
    failed: "",
  };

  function show(upload) {
    card.dataset.state = upload.state;
    els.state.textContent = upload.state;
    const total = upload.row_count;
    els.rows.textContent = upload.rows_checked.toLocaleString() + (total ? " of " + total.toLocaleString() : "");
    if (total) els.bar.value = upload.rows_checked / total;
    els.hint.textContent = HINTS[upload.state] || "";
    if (upload.error) {
      els.error.textContent = upload.filename + ": " + upload.error;
      els.error.hidden = false;
    }
  }

  function poll() {
    fetch("/api/prompt-uploads/" + encodeURIComponent(id), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        const upload = data.upload;
        show(upload);
        if (upload.state === "done" && upload.prompt_set) {
          window.location.assign("/prompt-sets/" + encodeURIComponent(upload.prompt_set.id) + "/");
        } else if (upload.state !== "failed") {
          setTimeout(poll, 1000);
        }
      })
      .catch(function () { setTimeout(poll, 3000); });  // the server is away: keep asking
  }

  if (card.dataset.state !== "failed" && card.dataset.state !== "done") poll();
})();
