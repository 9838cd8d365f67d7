// The ocrq page: submit files with the pasted key, poll each job, show its pages' text as each is read, and list
// the tenant's recent jobs.
(function () {
  "use strict";

  const KEY_STORE = "ocrq.apiKey";
  const POLL_MS = 700;
  const TERMINAL = new Set(["succeeded", "failed", "canceled"]);
  const EXTENSIONS = { text: "txt", markdown: "md", json: "json", pdf: "pdf", hocr: "hocr", alto: "alto.xml",
                       page: "page.zip", csv: "csv", xlsx: "xlsx" };
  const PREVIEWABLE = /^image\/(png|jpeg|webp|gif|bmp|svg\+xml)$/;

  const $ = (selector, root = document) => root.querySelector(selector);
  const keyInput = $("#api-key");
  const jobsList = $("#jobs");
  const notice = $("#notice");

  keyInput.value = sessionStorage.getItem(KEY_STORE) || "";
  keyInput.addEventListener("input", () => sessionStorage.setItem(KEY_STORE, keyInput.value.trim()));
  $("#forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    keyInput.value = "";
    keyInput.focus();
  });

  class ApiError extends Error {
    constructor(message, retryAfter) {
      super(message);
      this.retryAfter = retryAfter;
    }
  }

  async function api(path, options = {}) {
    const key = keyInput.value.trim();
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    let response;
    try {
      response = await fetch(path, { ...options, headers });
    } catch (err) {
      throw new ApiError("The server did not answer. Is ocrq running?", 2);
    }
    if (response.status === 401) throw new ApiError("The API key was refused: paste a valid key above.");
    if (response.status === 429 || response.status === 503) {
      throw new ApiError("The server is busy; trying again.", Number(response.headers.get("Retry-After")) || 2);
    }
    return response;
  }

  async function detail(response) {
    try {
      const body = await response.json();
      return typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? body);
    } catch (err) {
      return response.statusText;
    }
  }

  function showNotice(message) {
    notice.textContent = message;
    notice.hidden = !message;
  }

  function makeCard(file) {
    const node = $("#job-template").content.firstElementChild.cloneNode(true);
    const card = { file, node, jobId: null, stem: file.name.replace(/\.[^.]+$/, "") || "result" };
    const id = `job-${jobsList.children.length + 1}`;
    $(".job-name", node).textContent = file.name;
    $(".job-name", node).id = `${id}-name`;
    $("article", node).setAttribute("aria-labelledby", `${id}-name`);
    $(".progress", node).setAttribute("aria-label", `Pages read of ${file.name}`);
    $(".result", node).setAttribute("aria-label", `Text of ${file.name}`);
    $(".downloads", node).setAttribute("aria-label", `Downloads for ${file.name}`);
    for (const button of node.querySelectorAll(".downloads button")) {
      button.setAttribute("aria-label", `${button.textContent} of ${file.name}`);
      button.addEventListener("click", () => download(card, button.dataset.format));
    }
    showPreview(card);
    setStatus(card, "uploading");
    jobsList.prepend(node);
    $("#no-jobs").hidden = true;
    return card;
  }

  function showPreview(card) {
    const box = $(".preview", card.node);
    const url = URL.createObjectURL(card.file);
    if (PREVIEWABLE.test(card.file.type)) {
      const img = document.createElement("img");
      img.src = url;
      img.alt = `Page image of ${card.file.name}`;
      box.append(img);
    } else if (card.file.type === "application/pdf") {
      const object = document.createElement("object");
      object.data = url;
      object.type = "application/pdf";
      object.setAttribute("aria-label", `First page of ${card.file.name}`);
      object.textContent = "This browser cannot show the PDF here.";
      box.append(object);
    } else {
      box.textContent = "No preview for this kind of file.";
    }
  }

  function setStatus(card, status) {
    const badge = $(".status", card.node);
    badge.textContent = status;
    badge.dataset.status = status;
  }

  function showError(card, message) {
    const error = $(".error", card.node);
    error.textContent = message;
    error.hidden = !message;
  }

  function update(card, job) {
    setStatus(card, job.status);
    const total = job.pages_total || 0;
    const progress = $(".progress", card.node);
    progress.max = Math.max(total, 1);
    progress.value = job.pages_done || 0;
    const failed = job.pages_failed ? `, ${job.pages_failed} failed` : "";
    $(".count", card.node).textContent = total ? `${job.pages_done} / ${total} pages${failed}` : "counting pages…";
  }

  async function submit(file) {
    const card = makeCard(file);
    const form = new FormData();
    form.append("file", file);
    form.append("priority", $("#priority").value);
    const pages = $("#pages").value.trim();
    if (pages) form.append("pages", pages);
    try {
      const response = await api("/jobs", { method: "POST", body: form });
      if (response.status !== 202) {
        setStatus(card, "rejected");
        return notRead(card, `Not accepted: ${await detail(response)}`);
      }
      const job = await response.json();
      card.jobId = job.id;
      update(card, job);
      loadRecent();
      poll(card);
    } catch (err) {
      setStatus(card, "not sent");
      notRead(card, err.message);
    }
  }

  // A file that never became a job: say why, and leave nothing that looks like it is still coming.
  function notRead(card, message) {
    showError(card, message);
    const result = $(".result", card.node);
    result.setAttribute("aria-busy", "false");
    result.textContent = "Nothing will be read from this file.";
    $(".downloads", card.node).hidden = true;
    $(".count", card.node).textContent = "";
    $(".progress", card.node).hidden = true;
  }

  async function poll(card) {
    let wait = POLL_MS;
    try {
      const response = await api(`/jobs/${card.jobId}`);
      if (!response.ok) throw new ApiError(`Could not read the job (${response.status}): ${await detail(response)}`);
      const job = await response.json();
      showError(card, "");
      update(card, job);
      if (TERMINAL.has(job.status)) return finish(card, job);
      if (job.pages_done > (card.pagesShown || 0)) await showPages(card);
    } catch (err) {
      if (err.retryAfter === undefined) return showError(card, err.message);
      showError(card, err.message);
      wait = err.retryAfter * 1000;
    }
    setTimeout(() => poll(card), wait);
  }

  // The pages read so far, in page order, while the job runs (GET /jobs/{id}/pages); the full result replaces them.
  async function showPages(card) {
    const response = await api(`/jobs/${card.jobId}/pages?after=${card.after || 0}&format=markdown`);
    if (!response.ok) return;
    const body = await response.json();
    const result = $(".result", card.node);
    if (!card.pagesShown) result.textContent = "";
    for (const page of body.pages) {
      let section = result.querySelector(`section[data-page="${page.page}"]`);
      if (!section) {
        section = document.createElement("section");
        section.className = "page-text";
        section.dataset.page = page.page;
        const later = [...result.children].find((node) => Number(node.dataset.page) > page.page);
        result.insertBefore(section, later || null);
        card.pagesShown = (card.pagesShown || 0) + 1;
      }
      section.innerHTML = page.status === "succeeded" ? window.ocrqMarkdown.render(page.text || "") : "";
      if (page.status !== "succeeded") section.textContent = `Page ${page.page} could not be read: ${page.error}`;
    }
    if (body.next_after !== null) card.after = body.next_after;
  }

  async function finish(card, job) {
    loadRecent();
    const result = $(".result", card.node);
    result.setAttribute("aria-busy", "false");
    if (job.status !== "succeeded") {
      const reasons = (job.page_errors || []).map((e) => `page ${e.page}: ${e.error}`).join("; ");
      result.textContent = job.status === "canceled" ? "The job was canceled." : "No text could be read.";
      return showError(card, [job.error, reasons].filter(Boolean).join(" ") || `The job ${job.status}.`);
    }
    try {
      const response = await api(`/jobs/${card.jobId}/result?format=markdown`);
      if (!response.ok) throw new ApiError(`Could not fetch the text (${response.status}): ${await detail(response)}`);
      result.innerHTML = window.ocrqMarkdown.render(await response.text());
      for (const button of card.node.querySelectorAll(".downloads button")) button.disabled = false;
      if (job.pages_failed) showError(card, `${job.pages_failed} page(s) could not be read; see the text.`);
    } catch (err) {
      showError(card, err.message);
    }
  }

  async function download(card, format) {
    try {
      await save(card.jobId, card.stem, format);
    } catch (err) {
      showError(card, err.message);
    }
  }

  async function save(jobId, stem, format) {
    const response = await api(`/jobs/${jobId}/result?format=${encodeURIComponent(format)}`);
    if (!response.ok) throw new ApiError(`Download failed (${response.status}): ${await detail(response)}`);
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    // Several tables (or none) come as a zip of one CSV a table.
    const zipped = format === "csv" && (response.headers.get("content-type") || "").startsWith("application/zip");
    link.download = `${stem}.${EXTENSIONS[format]}${zipped ? ".zip" : ""}`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // "Your jobs": the key's 20 newest jobs (GET /jobs), each with its status, pages and a download of its text.
  async function loadRecent() {
    const table = $("#recent");
    const empty = $("#no-recent");
    if (!keyInput.value.trim()) return;
    try {
      const response = await api("/jobs?limit=20");
      if (!response.ok) throw new ApiError(`Could not list your jobs (${response.status}): ${await detail(response)}`);
      const { jobs } = await response.json();
      const rows = $("tbody", table);
      rows.textContent = "";
      for (const job of jobs) rows.append(recentRow(job));
      table.hidden = !jobs.length;
      empty.hidden = !!jobs.length;
      empty.textContent = jobs.length ? "" : "This key has sent no job yet.";
    } catch (err) {
      empty.hidden = false;
      empty.textContent = err.message;
    }
  }

  function recentRow(job) {
    const row = document.createElement("tr");
    const name = job.filename || job.id;
    const failed = job.pages_failed ? ` (${job.pages_failed} failed)` : "";
    const cells = [name, job.erased_at ? `${job.status}, erased` : job.status,
      `${job.pages_done} / ${job.pages_total}${failed}`, new Date(job.created_at).toLocaleString()];
    for (const text of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    const links = document.createElement("td");
    if (job.status === "succeeded" && !job.erased_at && !job.expired_at) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Download markdown";
      button.setAttribute("aria-label", `Download markdown of ${name}`);
      button.addEventListener("click", () => save(job.id, name.replace(/\.[^.]+$/, ""), "markdown")
        .catch((err) => showNotice(err.message)));
      links.append(button);
    }
    row.append(links);
    return row;
  }

  $("#refresh-recent").addEventListener("click", loadRecent);
  keyInput.addEventListener("change", loadRecent);
  loadRecent();

  function addFiles(files) {
    if (!files.length) return;
    if (!keyInput.value.trim()) {
      showNotice("Paste an API key first (ocrq serve prints one and saves it to ~/.ocrq/api_key).");
      keyInput.focus();
      return;
    }
    showNotice("");
    for (const file of files) submit(file);
  }

  const input = $("#files");
  input.addEventListener("change", () => {
    addFiles([...input.files]);
    input.value = "";
  });

  const zone = $("#drop-zone");
  // A file dropped beside the zone would otherwise make the browser leave the page to open it.
  for (const type of ["dragover", "drop"]) window.addEventListener(type, (event) => event.preventDefault());
  zone.addEventListener("dragover", () => zone.classList.add("over"));
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    zone.classList.remove("over");
    addFiles([...event.dataTransfer.files]);
  });
})();
