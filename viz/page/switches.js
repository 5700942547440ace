// The what-if switches and what they changed.
"use strict";

function renderSwitches() {
  const box = $("switches");
  const nodes = [el("h3", `What if… (layer ${state.layer}, head ${stepHead()})`)];
  nodes.push(el("p", "Each switch changes one step of this head and runs the rest of the " +
    "model (the layers after it, the final norm, the LM head) on what it leaves. The result " +
    "is not what the model computes.", { class: "muted" }));
  for (const { key, text } of MODEL.switches) {
    const label = el("label");
    const input = el("input", null, { type: "checkbox", "data-switch": key });
    input.checked = state.switches.has(key);
    input.disabled = !DATA.served;
    input.addEventListener("change", () => {
      if (input.checked) state.switches.add(key);
      else state.switches.delete(key);
      state.derivation = null;
      show(state.result.prompt, { keepPrompt: true });
    });
    label.append(input, document.createTextNode(" " + text));
    nodes.push(label);
  }
  if (!DATA.served) {
    nodes.push(el("p", "The switches run the model again: open this page with " +
      "explore_attention.py --serve to use them.", { class: "muted", id: "switches-note" }));
  }
  if (state.switches.has("no_mask") && state.layer === MODEL.n_layer - 1) {
    nodes.push(el("p", "The last character already sees every other: in the last layer, " +
      "lifting the mask changes only the rows before it, so the next-character table stays " +
      "as it was. Pick an earlier layer to see the prediction move.", { class: "muted" }));
  }
  box.replaceChildren(...nodes);
}

function renderChanges() {
  const box = $("whatif-changes");
  const own = state.result.model;
  const w = whatIf();
  box.hidden = !own;
  if (!own) return;
  const labels = rowLabels();
  const nodes = [el("h3", `What changed (layer ${w.layer}, head ${w.head})`)];
  nodes.push(el("p", "This head's weights: the model's own, then the what-if's.", { class: "muted" }));
  const switched = state.result.weights[w.layer][w.head];
  const pair = el("div", null, { class: "row" });
  for (const [name, values] of [["model", own.head_weights], ["what-if", switched]]) {
    const side = el("div");
    side.append(el("div", name === "model" ? "The model's own" : "What-if",
      { class: name === "model" ? "" : "whatif-tag" }));
    const step = { key: `changes-${name}`, kind: "weights", columns: "characters",
      shape: [labels.length, labels.length], values };
    side.append(renderMatrix(step, 150));
    pair.append(side);
  }
  nodes.push(pair);
  let largest = 0;
  own.head_weights.forEach((row, i) => row.forEach((x, j) => {
    largest = Math.max(largest, Math.abs(x - switched[i][j]));
  }));
  nodes.push(el("p", `Largest change of a weight: ${fmt(largest, DERIVATION_DECIMALS)}.`, { class: "muted" }));
  nodes.push(el("p", "Next character: the model's own 5 likeliest, then the what-if's " +
    `(temperature ${state.temperature.toFixed(2)}).`, { class: "muted" }));
  const mine = probabilities(own.logits, state.temperature);
  const theirs = probabilities(state.result.logits, state.temperature);
  const table = el("table", null, { class: "weights", id: "changes-next" });
  const head = el("tr");
  for (const t of ["#", "model's own", "", "what-if", ""]) head.append(el("th", t));
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  const a = topK(own.logits, 5);
  const b = topK(state.result.logits, 5);
  for (let r = 0; r < 5 && r < a.length; r++) {
    const tr = el("tr");
    tr.append(el("td", r + 1, { class: "idx" }),
      el("td", MODEL.vocab_labels[a[r]], { class: "char" }), el("td", mine[a[r]].toFixed(4)),
      el("td", MODEL.vocab_labels[b[r]], { class: "char" }), el("td", theirs[b[r]].toFixed(4)));
    tbody.append(tr);
  }
  table.append(thead, tbody);
  nodes.push(table);
  box.replaceChildren(...nodes);
}
