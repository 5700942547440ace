// The what-if switches and what they changed.
"use strict";

// One what-if's checkbox and its label: ticking it adds the switch to state.switches
// and asks the server again (a file from --html cannot: the box is greyed out).
function switchCheckbox(key) {
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
  label.append(input, document.createTextNode(" " + t(`switch.${key}`)));
  return label;
}

function renderSwitches() {
  const box = $("switches");
  const nodes = [el("h3", t("switches.title", { layer: state.layer, head: stepHead() }))];
  nodes.push(richEl("p", "switches.help", {}, { class: "muted" }));
  for (const { key } of MODEL.switches) nodes.push(switchCheckbox(key));
  if (!DATA.served) {
    nodes.push(el("p", t("switches.file"), { class: "muted", id: "switches-note" }));
  }
  if (state.switches.has("no_mask") && state.layer === MODEL.n_layer - 1) {
    nodes.push(el("p", t("switches.last_layer"), { class: "muted", id: "last-layer-note" }));
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
  const nodes = [el("h3", t("changes.title", { layer: w.layer, head: w.head }))];
  nodes.push(changedRows(own.changed || []));
  nodes.push(el("p", t("changes.weights"), { class: "muted" }));
  const switched = state.result.weights[w.layer][w.head];
  const pair = el("div", null, { class: "row" });
  for (const [name, values] of [["model", own.head_weights], ["what-if", switched]]) {
    const side = el("div");
    side.append(el("div", t(name === "model" ? "changes.own" : "changes.whatif"),
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
  nodes.push(el("p", t("changes.largest", { value: fmt(largest, DERIVATION_DECIMALS) }), { class: "muted" }));
  nodes.push(el("p", t("changes.next", { temperature: state.temperature.toFixed(2) }), { class: "muted" }));
  const mine = probabilities(own.logits, state.temperature);
  const theirs = probabilities(state.result.logits, state.temperature);
  const table = el("table", null, { class: "weights", id: "changes-next" });
  const head = el("tr");
  for (const name of ["#", t("next.own"), "", t("changes.whatif"), ""]) head.append(el("th", name));
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

// The rows whose likeliest next character the switch changes (the server compares the
// two passes at every position): each a button that picks the row, whose prediction
// the lens below then shows. A chapter sentence ends in 다 and then '.', whatever the
// switch: the change is usually mid-sentence.
function changedRows(changed) {
  const box = el("div", null, { id: "changed-rows" });
  if (changed.length === 0) {
    box.append(el("p", t("changes.none"), { class: "whatif-tag" }));
    return box;
  }
  box.append(el("p", t("changes.rows", { n: changed.length }), { class: "whatif-tag" }));
  const row = el("div", null, { class: "row" });
  const labels = rowLabels();
  for (const c of changed) {
    const button = el("button", t("changes.row", { i: c.position, char: labels[c.position],
      own: MODEL.vocab_labels[c.own], whatif: MODEL.vocab_labels[c.what_if] }),
    { type: "button", "data-row": c.position });
    button.addEventListener("click", () => {
      state.row = c.position;
      render();
      $("lens-section").scrollIntoView({ block: "start" });
    });
    row.append(button);
  }
  box.append(row);
  return box;
}
