// The presets, drawing the whole page, and asking the server: runs last.
"use strict";

function renderPresets() {
  const box = $("presets");
  const presets = MODEL.presets || [];
  if (!DATA.served || presets.length === 0) { box.replaceChildren(); return; }
  const nodes = [];
  for (const [source, label] of [["chapter", "The chapters' sentences:"], ["run", "This run's own text:"]]) {
    const mine = presets.filter((p) => p.source === source);
    if (mine.length === 0) continue;
    const row = el("div", null, { class: "row" });
    row.append(el("span", label, { class: "muted" }));
    for (const p of mine) {
      const button = el("button", p.text.replace(/\n/g, "↵"), { type: "button", "data-preset": p.text });
      if (p.missing.length) {
        button.disabled = true;
        button.title = `not in this model's vocabulary: ${p.missing.join(" ")}`;
      }
      button.addEventListener("click", () => { $("prompt").value = p.text; show(p.text); });
      row.append(button);
    }
    const lacking = mine.filter((p) => p.missing.length);
    if (lacking.length) {
      row.append(el("span", lacking.map((p) => `${p.text}: the model never saw ${p.missing.join(" ")}`).join("; "),
        { class: "muted" }));
    }
    nodes.push(row);
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
  renderLens();
}

function request() {
  return {
    prompt: state.result ? state.result.prompt : "",
    temperature: state.temperature,
    layer: state.layer,
    head: stepHead(),
    switches: [...state.switches],
  };
}

async function post(path, body) {
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    return await response.json();
  } catch (error) {
    return { error: "The server did not answer: is explore_attention.py --serve still running?" };
  }
}

async function show(prompt, options) {
  if (!DATA.served) return;
  const ticket = ++state.request;
  showMessages(["Computing…"], false);
  $("show").disabled = true;
  const answer = await post("api/attention", { ...request(), prompt });
  if (ticket !== state.request) return; // a later request took over
  $("show").disabled = false;
  if (answer.error !== undefined) {
    showMessages([answer.error], true);
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
  const answer = await post("api/steps", request());
  if (ticket !== state.request) return;
  if (answer.error !== undefined) {
    showMessages([answer.error], true);
    return;
  }
  state.steps = answer;
  renderSteps();
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

function start() {
  const positions = MODEL.position === "rope" ? "RoPE" : "learned positions";
  $("model").textContent = `${MODEL.name}: ${MODEL.n_layer} layers, ${MODEL.n_head} heads, ` +
    `n_embd ${MODEL.n_embd} (d_k ${MODEL.d_k}), block_size ${MODEL.block_size}, ` +
    `${MODEL.vocab.length} characters; ${positions}, ${MODEL.norm}` +
    (MODEL.qk_norm ? ", QK-norm" : "");
  const box = $("prompt");
  if (state.result) box.value = state.result.prompt;
  if (DATA.served) {
    $("prompt-help").textContent = "Ctrl+Enter also shows it. " +
      `At most ${MODEL.block_size} characters (block_size) are used: the last ones.`;
    $("show").addEventListener("click", () => show(box.value));
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) show(box.value);
    });
    $("sample").addEventListener("click", sampleNext);
  } else {
    box.readOnly = true;
    $("show").disabled = true;
    $("prompt-help").textContent =
      "This file holds one prompt. To type others, run explore_attention.py --serve.";
  }
  $("temperature").addEventListener("input", (event) => {
    state.temperature = Number(event.target.value);
    if (state.result) { renderNext(); renderChanges(); }
  });
  renderPresets();
  if (state.result) showMessages(state.result.notes, false);
  else showMessages(["Type a prompt, or pick one of the sentences above, and press Show attention."], false);
  render();
  loadSteps();
}

start();
