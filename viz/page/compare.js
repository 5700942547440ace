// Two models side by side (explore_attention.py --compare; viz/model_compare.py): the
// same prompt through the served model (A) and a second (B), each its own forward pass:
// their next-character tables, what each layer would predict, each head's weights, and
// what differs between them, marked.
"use strict";

const MODEL_NAMES = ["A", "B"];
const comparison = { prompt: null, answer: null, ticket: 0 };

async function loadComparison(prompt) {
  if (!DATA.served || !DATA.compare) return;
  if (comparison.prompt === prompt && comparison.answer && comparison.answer.error === undefined) {
    return; // the same prompt: the answer already drawn
  }
  const ticket = ++comparison.ticket;
  const answer = await post("api/compare", { prompt });
  if (ticket !== comparison.ticket) return; // a later prompt took over
  comparison.prompt = prompt;
  comparison.answer = answer;
  renderComparison();
}

function compareLabel(answer, char) {
  return answer.labels[char] === undefined ? char : answer.labels[char];
}

// One model's next-character table; `rows` is the answer's [char, p_A, p_B, changed].
function compareNextTable(answer, side) {
  const model = answer.models[side];
  const other = 1 - side;
  const byChar = new Map(answer.next.map((row) => [row[0], row]));
  const table = el("table", null, { class: "weights compare-next", "data-model": MODEL_NAMES[side] });
  const titles = el("tr");
  for (const text of ["#", t("next.character"), t("next.probability"),
    t("compare.in_other", { name: MODEL_NAMES[other] }), ""]) titles.append(el("th", text));
  const head = el("thead");
  head.append(titles);
  const body = el("tbody");
  model.next.forEach(([char, p], rank) => {
    const row = byChar.get(char);
    const theirs = row[1 + other];
    const tr = el("tr", null, { "data-char": char });
    if (row[3]) tr.classList.add("changed");
    tr.append(
      el("td", rank + 1, { class: "idx" }),
      el("td", compareLabel(answer, char), { class: "char" }),
      el("td", p.toFixed(4), { class: "probability", title: String(p) }),
      el("td", theirs === null ? t("compare.lacks") : theirs.toFixed(4),
        { class: "other", title: String(theirs) }),
      el("td", row[3] ? t("compare.moved") : "", { class: "mark" }),
    );
    body.append(tr);
  });
  table.append(head, body);
  const box = el("div");
  box.append(el("h4", t("compare.model", { name: MODEL_NAMES[side], label: model.label })), table);
  return box;
}

function compareLayersTable(answer) {
  const table = el("table", null, { class: "weights", id: "compare-layers" });
  const titles = el("tr");
  for (const text of ["", "A", "B", ""]) titles.append(el("th", text));
  const head = el("thead");
  head.append(titles);
  const body = el("tbody");
  for (const [layer, a, b, differs] of answer.layers) {
    const tr = el("tr", null, { "data-layer": layer });
    if (differs) tr.classList.add("changed");
    tr.append(el("th", t("lens.after_block", { layer })));
    for (const [char, p] of [a, b]) {
      const td = el("td", null, { title: String(p) });
      td.append(el("span", compareLabel(answer, char), { class: "char" }),
        document.createTextNode(` ${p.toFixed(4)}`));
      tr.append(td);
    }
    tr.append(el("td", differs ? t("compare.differs") : "", { class: "mark" }));
    body.append(tr);
  }
  table.append(head, body);
  return table;
}

// Mean |A − B| of each head's weights; a click shows that head below (and above).
function compareHeadsTable(answer) {
  const table = el("table", null, { class: "weights", id: "compare-heads" });
  const titles = el("tr");
  titles.append(el("th"));
  answer.heads[0].forEach((_, h) => titles.append(el("th", t("head.name", { head: h }))));
  const head = el("thead");
  head.append(titles);
  const body = el("tbody");
  answer.heads.forEach((row, layer) => {
    const tr = el("tr", null, { "data-layer": layer });
    tr.append(el("th", t("compare.layer", { layer })));
    row.forEach((x, h) => {
      const td = el("td", formatFixed(x, DERIVATION_DECIMALS), { title: String(x), "data-head": h });
      shade(td, x / Math.max(...answer.heads.flat(), 1e-12));
      if (layer === state.layer && h === stepHead()) td.classList.add("locked");
      td.addEventListener("click", () => {
        state.layer = layer;
        state.head = h;
        if (state.result) pickedHead();
        else renderComparison();
      });
      tr.append(td);
    });
    body.append(tr);
  });
  table.append(head, body);
  return table;
}

// The head whose weights moved most, one click away: a newcomer looked for it in the grid.
function mostChanged(answer) {
  let best = [0, 0];
  answer.heads.forEach((row, layer) => row.forEach((x, h) => {
    if (x > answer.heads[best[0]][best[1]]) best = [layer, h];
  }));
  const [layer, h] = best;
  const button = el("button", t("compare.most_changed", { layer, head: t("head.name", { head: h }),
    value: formatFixed(answer.heads[layer][h], DERIVATION_DECIMALS) }),
  { type: "button", id: "compare-most-changed", "data-layer": layer, "data-head": h });
  button.addEventListener("click", () => {
    state.layer = layer;
    state.head = h;
    if (state.result) pickedHead();
    else renderComparison();
  });
  const line = el("p");
  line.append(button);
  return line;
}

function compareWeights(answer) {
  const layer = state.layer;
  const head = stepHead();
  const [a, b] = answer.models.map((m) => m.weights[layer][head]);
  const labels = [...answer.models[0].prompt].map((c) => compareLabel(answer, c));
  const nodes = [el("h3", t("compare.weights_title", { layer, head: t("head.name", { head }) }))];
  const row = el("div", null, { class: "compare-row" });
  const difference = a.map((r, i) => r.map((x, j) => x - b[i][j]));
  const tables = [[a, "compare-weights-a", "A", "weights"], [b, "compare-weights-b", "B", "weights"],
    [difference, "compare-weights-diff", "A − B", "difference"]];
  for (const [values, id, name, kind] of tables) {
    const box = el("div", null, { class: "scroll labelled" });
    box.append(el("h4", name), signedTable(values, labels, id, kind));
    row.append(box);
  }
  nodes.push(row);
  nodes.push(el("p", t("compare.weights_help"), { class: "muted" }));
  return nodes;
}

// Where the other model cannot read the prompt: this one's next characters and what each
// of its layers would predict, without a second column.
function aloneTables(answer, side) {
  const model = answer.models[side];
  const name = MODEL_NAMES[side];
  const table = el("table", null, { class: "weights compare-alone", "data-model": name });
  const titles = el("tr");
  for (const text of ["#", t("next.character"), t("next.probability")]) titles.append(el("th", text));
  const head = el("thead");
  head.append(titles);
  const body = el("tbody");
  model.next.forEach(([char, p], rank) => {
    const tr = el("tr", null, { "data-char": char });
    tr.append(el("td", rank + 1, { class: "idx" }), el("td", compareLabel(answer, char), { class: "char" }),
      el("td", p.toFixed(4), { class: "probability", title: String(p) }));
    body.append(tr);
  });
  table.append(head, body);
  const layers = el("table", null, { class: "weights compare-alone-layers", "data-model": name });
  const layerBody = el("tbody");
  model.layers.forEach(([char, p], layer) => {
    const tr = el("tr", null, { "data-layer": layer });
    const td = el("td", null, { title: String(p) });
    td.append(el("span", compareLabel(answer, char), { class: "char" }),
      document.createTextNode(` ${p.toFixed(4)}`));
    tr.append(el("th", t("lens.after_block", { layer })), td);
    layerBody.append(tr);
  });
  layers.append(layerBody);
  return [el("h3", t("compare.alone_title", { name, label: model.label, prompt: model.prompt })),
    table, richEl("h4", "compare.alone_layers", { name }), layers];
}

function renderComparison() {
  const section = $("compare-section");
  section.hidden = !DATA.compare;
  if (section.hidden) return;
  const answer = comparison.answer;
  const nodes = [richEl("p", "compare.help", {}, { class: "muted" })];
  if (!answer) {
    nodes.push(el("p", t("compare.none"), { class: "muted" }));
    $("compare").replaceChildren(...nodes);
    return;
  }
  if (answer.error !== undefined) {
    nodes.push(el("p", answer.message ? tm(answer.message) : answer.error, { class: "error" }));
    $("compare").replaceChildren(...nodes);
    return;
  }
  answer.models.forEach((model, side) => {
    if (model.missing.length === 0) return;
    // Each quoted: a bracket or a space among them reads as itself.
    const chars = model.missing.map((c) => `'${compareLabel(answer, c)}'`).join(" ");
    nodes.push(el("p", t("compare.missing", {
      name: MODEL_NAMES[side], label: model.label, n: model.missing.length, chars,
    }), { class: "note compare-missing", "data-model": MODEL_NAMES[side] }));
  });
  if (answer.next === null) {
    answer.models.forEach((model, side) => {
      if (model.next) nodes.push(...aloneTables(answer, side));
    });
    $("compare").replaceChildren(...nodes);
    return;
  }
  nodes.push(el("h3", t("compare.next_title", { prompt: answer.models[0].prompt })));
  const pair = el("div", null, { class: "compare-row" });
  pair.append(compareNextTable(answer, 0), compareNextTable(answer, 1));
  nodes.push(pair);
  nodes.push(el("p", t("compare.distance", { value: answer.distance.toFixed(4) }),
    { class: "muted", id: "compare-distance" }));
  nodes.push(richEl("h3", "compare.layers_title"), compareLayersTable(answer));
  if (answer.heads === null) {
    nodes.push(el("p", t("compare.heads_differ"), { class: "muted" }));
  } else {
    nodes.push(el("h3", t("compare.heads_title")), compareHeadsTable(answer), mostChanged(answer));
    nodes.push(...compareWeights(answer));
  }
  $("compare").replaceChildren(...nodes);
}
