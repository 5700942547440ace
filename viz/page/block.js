// The rest of the block on the learner's model (the chapter after self-attention): the
// residual stream before and after the attention, the second norm, the MLP; what each
// head and MLP pushes on the predicted next character; and the weights per word, as
// the chapters draw them. The server sends them with the steps ("extras").
"use strict";

const BLOCK_EXTRAS = ["words", "block", "attribution"];

// The extras of the shown steps: in the served answer, or in an --html file's steps.
function blockExtras() {
  const steps = stepsShown();
  if (!steps) return null;
  if (steps.block) return steps;
  return steps.extras ? steps.extras[String(stepHead())] : null;
}

function renderBlock() {
  $("block-title").textContent = t("block.title", { layer: state.layer }) + whatIfTag();
  renderBlockSwitches();
  const extras = blockExtras();
  for (const id of ["words", "block", "attribution"]) $(id).replaceChildren();
  if (!extras) return;
  renderWords(extras.words);
  renderBlockSteps(extras.block);
  renderAttribution(extras.attribution);
}

// The block's what-ifs (viz/attention_steps.py BLOCK_SWITCHES): zero this head's output,
// this layer's MLP, or one neuron of it; the model runs again with the part taken out.
function renderBlockSwitches() {
  const box = $("block-switches");
  if (state.neuron === undefined) state.neuron = 0;
  const nodes = [el("h3", t("block.switches", { layer: state.layer, head: stepHead() }))];
  const rerun = () => { state.derivation = null; show(state.result.prompt, { keepPrompt: true }); };
  for (const { key } of MODEL.block_switches || []) {
    const label = switchCheckbox(key);  // switches.js
    if (key === "zero_neuron") {
      const number = el("input", null, {
        type: "number", min: 0, max: 4 * MODEL.n_embd - 1, value: state.neuron, id: "neuron",
        "aria-label": t("block.neuron"),
      });
      number.disabled = !DATA.served;
      number.addEventListener("change", () => {
        state.neuron = Math.max(0, Math.min(4 * MODEL.n_embd - 1, Math.round(Number(number.value)) || 0));
        if (state.switches.has("zero_neuron")) rerun();
      });
      label.append(document.createTextNode(" "), number);
    }
    nodes.push(label);
  }
  box.replaceChildren(...nodes);
}

// Per word: each query word's rows averaged, each key word's columns summed.
function renderWords(words) {
  const box = $("words");
  if (!$("words-toggle").checked) return;
  if (words.words.length < 2) {
    box.append(el("p", t("words.one_word"), { class: "muted" }));
    return;
  }
  const labels = words.words.map((w) => w.replace(/ /g, "␣").replace(/\n/g, "↵"));
  box.append(el("p", tm(words.rule), { class: "note" }));
  for (const name of ["weights", "xx_weights", "xx_out"]) {
    const rows = words.tables[name];
    const square = name !== "xx_out";
    const table = el("table", null, { class: "weights", "data-words": name });
    const head = el("tr");
    head.append(el("th"));
    const cols = square ? labels : rows[0].map((_, j) => String(j));
    for (const c of cols.slice(0, NUMBER_COLUMNS)) head.append(el("th", c, { class: "char" }));
    if (square) head.append(el("th", t("table.sum")));
    table.append(head);
    rows.forEach((row, i) => {
      const tr = el("tr");
      tr.append(el("th", labels[i], { class: "char" }));
      for (const x of row.slice(0, NUMBER_COLUMNS)) {
        const td = el("td", fmt(x, DECIMALS), { title: exactText(x) });
        if (square) shade(td, x);
        tr.append(td);
      }
      if (square) tr.append(el("td", fmt(row.reduce((a, b) => a + b, 0), DECIMALS), { class: "sum" }));
      table.append(tr);
    });
    const wrap = el("div", null, { class: "scroll" });
    wrap.append(table);
    box.append(el("h4", t(`words.${name}`, { layer: state.layer, head: stepHead() })), wrap);
    // Wider than NUMBER_COLUMNS (weights·X's channels, or many words): say what is left out.
    if (cols.length > NUMBER_COLUMNS) {
      const shown = { last: NUMBER_COLUMNS - 1, total: cols.length };
      box.append(el("p", t(square ? "words.first_words" : "words.first_channels", shown),
        { class: "muted", "data-role": "columns-shown" }));
    }
  }
}

function renderBlockSteps(block) {
  const nodes = [];
  let chapter = 0;
  for (const key of block.order) {
    const step = block.steps[key];
    if (step.chapter !== chapter) {
      chapter = step.chapter;
      nodes.push(richEl("h3", "step.heading", { chapter, name: block.chapters[String(chapter)] }));
    }
    const card = el("div", null, { class: "step", "data-step": key });
    card.append(
      richEl("h4", step.title.key, step.title.args),
      el("div", tm(step.formula), { class: "formula" }),
      el("div", codeText(step.code), { class: "code" }),
      renderMatrix(step),
    );
    nodes.push(card);
  }
  $("block").replaceChildren(...nodes);
}

// Each part's push on the logit of the predicted character, a bar to scale, and the sum
// beside the model's logit (exact with the final norm's divisor held: the note says so).
function renderAttribution(answer) {
  const box = $("attribution");
  const label = answer.label === null ? String(answer.token) : answer.label;
  if (state.row !== null && state.row !== answer.position) { // pushes exist at the last only
    box.append(el("p", t("attribution.last_only",
      { last: quoted(answer.position), picked: quoted(state.row) }), { class: "note", id: "attribution-position" }));
  }
  box.append(el("h3", t("cli.pushes", {
    char: `'${label}'`, position: answer.position, norm: answer.norm,
    divisor: answer.divisor.toFixed(4),
  })));
  box.append(el("p", tm(answer.note), { class: "note" }));
  const largest = Math.max(...answer.parts.map((p) => Math.abs(p.push))) || 1;
  const table = el("table", null, { class: "pushes" });
  for (const part of answer.parts) {
    const tr = el("tr", null, { "data-part": `${part.kind},${part.layer},${part.head}` });
    const bar = el("span", null, { class: "bar" });
    bar.style.display = "inline-block";
    bar.style.height = "0.8em";
    bar.style.width = `${(100 * Math.abs(part.push)) / largest}px`;
    bar.style.background = part.push >= 0 ? "#dc2626" : "#1d4ed8";
    const cell = el("td");
    cell.append(bar);
    tr.append(el("th", t(`part.${part.kind}`, { layer: part.layer, head: part.head })),
      el("td", fmt(part.push, 4), { title: String(part.push) }), cell);
    table.append(tr);
  }
  const total = el("tr", null, { class: "sum" });
  total.append(el("th", t("cli.push_sum")), el("td", fmt(answer.total, 4), { title: String(answer.total) }),
    el("td", t("cli.push_logit", { logit: fmt(answer.logit, 4) })));
  table.append(total);
  box.append(table);
}
