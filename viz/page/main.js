// The presets, drawing the whole page, and asking the server: runs last.
"use strict";

function renderPresets() {
  const box = $("presets");
  const presets = MODEL.presets || [];
  if (!DATA.served || presets.length === 0) { box.replaceChildren(); return; }
  const nodes = [];
  for (const source of ["chapter", "later", "run"]) {
    const mine = presets.filter((p) => p.source === source);
    if (mine.length === 0) continue;
    const row = el("div", null, { class: "row", "data-source": source });
    row.append(el("span", t(`presets.${source}`), { class: "muted" }));
    for (const p of mine) {
      const button = el("button", p.text.replace(/\n/g, "↵"), { type: "button", "data-preset": p.text });
      if (p.missing.length) {
        button.disabled = true;
        button.title = t("presets.unknown", { chars: p.missing.join(" ") });
      }
      button.addEventListener("click", () => { $("prompt").value = p.text; show(p.text); });
      row.append(button);
    }
    const lacking = mine.filter((p) => p.missing.length);
    if (lacking.length) {
      row.append(el("span", lacking.map((p) => t("presets.never_saw",
        { text: p.text, chars: p.missing.join(" ") })).join("; "), { class: "muted" }));
    }
    nodes.push(row);
    // The chapters' 배 sentences start with 배: say why it reads the same in each.
    if (source === "chapter" && mine.some((p) => p.text.startsWith("배"))) {
      nodes.push(el("p", t("presets.first_position"), { class: "muted", id: "first-position" }));
    }
  }
  box.replaceChildren(...nodes);
}

function render() {
  $("explorer").hidden = state.result === null;
  if (state.result === null) return;
  if (state.row === null || state.row >= state.result.labels.length) {
    state.row = state.result.labels.length - 1;
  }
  renderBanner();
  renderControls();
  renderTable();
  renderHeads();
  renderNext();
  renderSwitches();
  renderChanges();
  renderSteps();
  renderBlock();
  renderLens();
  renderTraining();
  renderComparison();
}

function request() {
  return {
    prompt: state.result ? state.result.prompt : "",
    temperature: state.temperature,
    layer: state.layer,
    head: stepHead(),
    switches: [...state.switches],
    neuron: state.switches.has("zero_neuron") ? state.neuron : undefined, // block.js
    step: shownStep(), // training.js: a snapshot's step, or undefined: the finished model
  };
}

async function post(path, body) {
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, encoding: "float32" }), // tables as packed bytes
    });
    return unpackAnswer(await response.json());
  } catch (error) {
    return { error: t("error.no_server") };
  }
}

async function show(prompt, options) {
  if (!DATA.served) return;
  const ticket = ++state.request;
  showMessages([{ key: "status.computing", args: {} }], false);
  $("show").disabled = true;
  loadComparison(prompt); // compare.js: the second model, its own request
  const answer = await post("api/attention", { ...request(), prompt });
  if (ticket !== state.request) return; // a later request took over
  $("show").disabled = false;
  if (answer.error !== undefined) {
    showMessages([answer.message || answer.error], true);
    // The tables were for the previous prompt: hide them, lest they read as this one's.
    state.result = null;
    state.steps = null;
    render();
    return;
  }
  const keepRow = state.result && state.row === state.result.labels.length - 1;
  if (!(options && options.keepPrompt)) state.derivation = null;
  state.result = answer;
  if (keepRow) state.row = null; // follow the last character while continuing
  state.steps = null;
  showMessages(answer.notes, false);
  render();
  await loadSteps();
}

async function loadSteps() {
  if (!state.result) return;
  if (!DATA.served) {
    state.steps = DATA.steps ? DATA.steps[state.layer] : null;
    renderSteps();
    return;
  }
  const ticket = ++state.request;
  const answer = await post("api/steps", { ...request(), extras: BLOCK_EXTRAS });
  if (ticket !== state.request) return;
  if (answer.error !== undefined) {
    showMessages([answer.message || answer.error], true);
    return;
  }
  state.steps = answer;
  renderSteps();
  renderBlock();
}

function extend(char) {
  const box = $("prompt");
  box.value += char;
  show(box.value);
}

function sampleNext() {
  const probs = probabilities(state.result.logits, state.temperature);
  let u = Math.random();
  let id = probs.length - 1;
  for (let i = 0; i < probs.length; i++) {
    u -= probs[i];
    if (u < 0) { id = i; break; }
  }
  extend(MODEL.vocab[id]);
}

// Every word that depends on the language or the model, without asking the server.
function redraw() {
  applyStaticWords();
  $("model").textContent = t("model.summary", {
    name: MODEL.name, n_layer: MODEL.n_layer, n_head: MODEL.n_head, n_embd: MODEL.n_embd,
    d_k: MODEL.d_k, block_size: MODEL.block_size, vocab: MODEL.vocab.length,
    positions: { key: MODEL.position === "rope" ? "model.rope" : "model.learned", args: {} },
    norm: MODEL.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm",
    qk_norm: MODEL.qk_norm ? t("model.qk_norm") : "",
  });
  $("prompt-help").textContent = DATA.served
    ? t("prompt.help_served", { block_size: MODEL.block_size })
    : t("prompt.help_file");
  renderPresets();
  renderGlossary();
  renderTraining();
  renderComparison();
  showMessages(state.messages, state.messagesAreErrors);
  render();
}

function start() {
  renderLanguages();
  const box = $("prompt");
  if (state.result) box.value = state.result.prompt;
  if (DATA.served) {
    $("show").addEventListener("click", () => show(box.value));
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) show(box.value);
    });
    $("sample").addEventListener("click", sampleNext);
  } else {
    box.readOnly = true;
    $("show").disabled = true;
  }
  $("words-toggle").addEventListener("change", renderBlock);
  $("training-step").addEventListener("input", (event) => pickSnapshot(Number(event.target.value)));
  $("temperature").addEventListener("input", (event) => {
    state.temperature = Number(event.target.value);
    if (state.result) { renderNext(); renderChanges(); }
  });
  if (state.result) showMessages(state.result.notes, false);
  else showMessages([{ key: "status.start", args: {} }], false);
  redraw();
  loadSteps();
  loadSnapshots();
  if (state.result) loadComparison(state.result.prompt);
}

start();
