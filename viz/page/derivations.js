// Where one number comes from: a hovered or kept cell's dot product, scale, mask and
// softmax, or a row of weights·V.
"use strict";

// The kept derivation's cell, in each table it is read from (the same family of steps:
// Q·Kᵀ, ÷√d_k, the mask and the weights share their cells).
function isKept(key, i, j) {
  const d = state.derivation;
  if (!d || !d.locked || EXPLAINED[d.key] !== EXPLAINED[key] || d.i !== i) return false;
  return EXPLAINED[key] === "row" || d.j === j;
}

function hoverCell(key, i, j) {
  const d = state.derivation;
  if (d && (d.locked || (d.key === key && d.i === i && d.j === j))) return;
  state.derivation = { key, i, j, locked: false };
  renderDerivation();
}

function lockCell(key, i, j) {
  state.derivation = { key, i, j, locked: true };
  renderSteps();
}

function unlock() {
  state.derivation = null;
  renderSteps();
}

// The switches on for the head whose steps are shown.
function headSwitches() {
  const w = state.steps && state.steps.what_if;
  return w && w.layer === state.layer && w.head === stepHead() ? w.switches : [];
}

function renderDerivation() {
  const box = $("derivation");
  const d = state.derivation;
  const steps = stepsShown() && state.steps.heads[String(stepHead())];
  if (!d || !steps) {
    box.replaceChildren(el("h3", t("derivation.title")), el("p", t("derivation.help"), { class: "muted" }));
    return;
  }
  const nodes = [];
  const header = el("div", null, { class: "row" });
  header.append(el("strong", t(d.locked ? "derivation.kept" : "derivation.preview")));
  if (d.locked) {
    const button = el("button", t("derivation.unlock"), { type: "button", id: "unlock" });
    button.addEventListener("click", unlock);
    header.append(button);
  }
  nodes.push(header);
  if (EXPLAINED[d.key] === "row") nodes.push(...outDerivation(d.i, steps));
  else if (EXPLAINED[d.key] === "xx") nodes.push(...scoreDerivation(d.i, d.j, xxSource()));
  else nodes.push(...scoreDerivation(d.i, d.j, headSource(steps)));
  box.replaceChildren(el("h3", t("derivation.title")), ...nodes);
  box.dataset.kind = EXPLAINED[d.key];
  box.dataset.i = d.i;
  box.dataset.j = d.j;
}

// What a score cell is made of: the vectors dotted, the scale, the mask, the softmax.
function headSource(steps) {
  const on = headSwitches();
  const xx = on.includes("xx_scores");
  const x = state.steps.layer_steps.x.values;
  return {
    a: xx ? x : steps.q.values, b: xx ? x : steps.k.values,
    aName: xx ? "x" : "q", bName: xx ? "x" : "k",
    raw: steps.scores.values, scaled: steps.scaled.values, masked: steps.masked.values,
    weights: steps.weights.values,
    scale: on.includes("no_scale") ? null : Math.sqrt(state.steps.d_k),
    mask: !on.includes("no_mask"), uniform: on.includes("uniform"), switched: on,
  };
}

function xxSource() {
  const L = state.steps.layer_steps;
  return {
    a: L.x.values, b: L.x.values, aName: "x", bName: "x",
    raw: L.xx.values, scaled: null, masked: null, weights: L.xx_weights.values,
    scale: null, mask: true, uniform: false, switched: [], chapter: true,
  };
}

function result(text, role, exact) {
  return el("div", text, { class: "result", "data-role": role, "data-exact": String(exact) });
}

// A score cell's derivation in two columns, to be read without scrolling at 1280 × 800:
// the cell and the dot product on the left, the scale, the mask and the softmax on the
// right (one column where the panel is narrow).
function scoreDerivation(i, j, src) {
  const { nodes, split, intro } = scoreSteps(i, j, src);
  // Past 32 channels (X·Xᵀ's x_i, all C of them) the products table is too wide to share
  // the panel: the mask and the softmax go below it, at the panel's width.
  if (src.a[i].length > 32) return nodes;
  const left = el("div", null, { class: "derivation-part" });
  const right = el("div", null, { class: "derivation-part" });
  left.append(...nodes.slice(intro, split));
  right.append(...nodes.slice(split));
  const columns = el("div", null, { class: "derivation-columns" });
  columns.append(left, right);
  return [...nodes.slice(0, intro), columns];
}

function scoreSteps(i, j, src) {
  const labels = rowLabels();
  const D = DERIVATION_DECIMALS;
  const nodes = [];
  // Whose numbers the tables hold: X·Xᵀ and a switched head's are not the model's.
  const whose = t(src.chapter ? "derivation.whose_xx" : src.switched.length
    ? "derivation.whose_whatif" : "derivation.whose_model");
  nodes.push(el("p", t(src.chapter ? "derivation.cell_xx" : "derivation.cell",
    { i, j, query: labels[i], key: labels[j] })));
  if (src.switched.length) {
    const changes = src.switched.map((key) => t(`switch.${key}`)).join("; ");
    nodes.push(el("p", t("derivation.switched", { changes }), { class: "whatif-tag" }));
  }
  const intro = nodes.length;
  // 1. the dot product
  const a = src.a[i];
  const b = src.b[j];
  nodes.push(el("h4", t("derivation.dot", { a: `${src.aName}_${i}`, b: `${src.bName}_${j}` })));
  // Long vectors (past 32 channels) in two halves side by side, to keep the panel short.
  const half = a.length > 32 ? Math.ceil(a.length / 2) : a.length;
  const products = el("table", null, { class: "weights", "data-role": "products" });
  const titles = el("tr");
  for (let part = 0; part < Math.ceil(a.length / half); part++) {
    for (const name of [t("derivation.ch"), `${src.aName}_${i}`, `${src.bName}_${j}`, t("derivation.product")]) {
      titles.append(el("th", name));
    }
  }
  const thead = el("thead");
  thead.append(titles);
  const tbody = el("tbody");
  const rowsOf = [...Array(half)].map(() => el("tr"));
  let sum = 0;
  a.forEach((x, m) => {
    const product = x * b[m];
    sum += product;
    rowsOf[m % half].append(el("td", m, { class: "idx" }), el("td", fmt(x, D), { title: exactText(x) }),
      el("td", fmt(b[m], D), { title: exactText(b[m]) }),
      el("td", fmt(product, D), { title: String(product), "data-role": "product" }));
  });
  tbody.append(...rowsOf);
  products.append(thead, tbody);
  const wrap = el("div", null, { class: "scroll" });
  wrap.append(products);
  nodes.push(wrap);
  const raw = src.raw[i][j];
  nodes.push(result(`${t("table.sum")} = ${fmt(sum, D)}`, "sum", sum));
  nodes.push(result(t("derivation.their_score", { whose, value: fmt(raw, D) }), "model-score", raw));
  const split = nodes.length;
  // 2. the scale
  let scaled = raw;
  if (src.scaled) {
    scaled = src.scaled[i][j];
    nodes.push(el("h4", "2. ÷ √d_k"));
    if (src.scale === null) {
      nodes.push(el("p", t("derivation.no_scale"), { class: "whatif-tag" }));
    } else {
      nodes.push(result(`${fmt(raw, D)} ÷ √${state.steps.d_k} = ${fmt(raw, D)} ÷ ${fmt(src.scale, D)} = ` +
        `${fmt(raw / src.scale, D)}`, "scaled", raw / src.scale));
    }
    nodes.push(result(`${whose} ÷ √d_k: ${fmt(scaled, D)}`, "model-scaled", scaled));
  }
  // 3. the mask
  nodes.push(el("h4", t("derivation.mask_title", { n: src.scaled ? 3 : 2 })));
  const future = j > i;
  const maskKey = !src.mask ? (future ? "derivation.no_mask_future" : "derivation.no_mask")
    : future ? "derivation.mask_future" : "derivation.mask_past";
  nodes.push(el("p", t(maskKey, { i, j, query: labels[i], key: labels[j] }),
    { "data-role": "mask", class: src.mask ? "" : "whatif-tag" }));
  // 4. the softmax over row i
  const rowScores = src.masked ? src.masked[i] : src.raw[i].map((x, jj) => (jj > i ? null : x));
  const visible = rowScores.map((x, jj) => [jj, x]).filter(([, x]) => x !== null);
  nodes.push(el("h4", t("derivation.softmax_title", { n: src.scaled ? 4 : 3, i })));
  const weightModel = src.weights[i][j];
  if (src.uniform) {
    const w = rowScores[j] === null ? 0 : 1 / visible.length;
    nodes.push(el("p", t("derivation.uniform", { n: visible.length, i }), { class: "whatif-tag" }));
    nodes.push(result(`${t("derivation.weight")} = ${fmt(w, D)}`, "weight", w));
    nodes.push(result(t("derivation.their_weight", { whose, value: fmt(weightModel, D) }), "model-weight", weightModel));
    return { nodes, split, intro };
  }
  const top = Math.max(...visible.map(([, x]) => x));
  const shift = top > 80 ? top : 0; // exp(x) overflows past about 709
  const exps = new Map(visible.map(([jj, x]) => [jj, Math.exp(x - shift)]));
  const total = [...exps.values()].reduce((p, q) => p + q, 0);
  const expName = shift ? `exp(s − ${fmt(shift, D)})` : "exp(s)";
  if (shift) {
    nodes.push(el("p", t("derivation.shift", { shift: fmt(shift, D) }), { class: "muted" }));
  }
  const soft = el("table", null, { class: "weights", "data-role": "softmax" });
  const head = el("tr");
  for (const name of ["j", "", "s", expName]) head.append(el("th", name));
  const shead = el("thead");
  shead.append(head);
  const sbody = el("tbody");
  // The masked future in one row (−∞, exp 0), unless the picked cell is in it: a
  // derivation of row i stays i + 2 rows long, however long the prompt.
  const hidden = rowScores.map((x, jj) => jj).filter((jj) => rowScores[jj] === null && jj !== j);
  rowScores.forEach((x, jj) => {
    if (hidden.includes(jj)) {
      if (jj !== hidden[0]) return;
      const tr = el("tr", null, { "data-role": "future" });
      const span = hidden.length > 1 ? `${jj}…${hidden[hidden.length - 1]}` : String(jj);
      tr.append(el("td", span, { class: "idx" }), el("th", t("derivation.future_rows", { n: hidden.length })),
        el("td", "−∞"), el("td", fmt(0, D)));
      sbody.append(tr);
      return;
    }
    const tr = el("tr", null, jj === j ? { class: "this" } : {});
    const e = x === null ? 0 : exps.get(jj);
    tr.append(el("td", jj, { class: "idx" }), el("th", labels[jj], { class: "char" }),
      el("td", fmt(x, D), { title: exactText(x) }), el("td", fmt(e, D), { title: String(e) }));
    sbody.append(tr);
  });
  soft.append(shead, sbody);
  const swrap = el("div", null, { class: "scroll" });
  swrap.append(soft);
  nodes.push(swrap);
  nodes.push(result(`${t("derivation.row_total")} = ${fmt(total, D)}`, "total", total));
  const mine = rowScores[j] === null ? 0 : exps.get(j);
  const w = mine / total;
  nodes.push(result(`${t("derivation.weight")} = ${fmt(mine, D)} ÷ ${fmt(total, D)} = ${fmt(w, D)}`, "weight", w));
  nodes.push(result(t("derivation.their_weight", { whose, value: fmt(weightModel, D) }), "model-weight", weightModel));
  return { nodes, split, intro };
}

// Row i of weights·V: each visible v_j times its weight, and their sum.
function outDerivation(i, steps) {
  const labels = rowLabels();
  const D = DERIVATION_DECIMALS;
  const w = steps.weights.values[i];
  const v = steps.v.values;
  const model = steps.out.values[i];
  const seen = [...Array(labels.length).keys()].filter((j) => w[j] !== 0);
  const nodes = [el("p", t("derivation.out", { i, char: labels[i] }))];
  const table = el("table", null, { class: "weights", "data-role": "weighted-sum" });
  const chars = el("tr");
  // A switched head's row is the what-if pass's, not the model's.
  const whose = t(headSwitches().length ? "derivation.out_whatif" : "derivation.out_model", { i });
  chars.append(el("th", t("derivation.channel")), el("th", t("table.sum")), el("th", whose));
  for (const j of seen) chars.append(el("th", `${j} ${labels[j]}`, { class: "char" }));
  // The weights' label at the row's start: under "the model's out_i" it read as one phrase.
  const weights = el("tr");
  weights.append(el("th", `${t("derivation.weight")} →`), el("th"), el("th"));
  for (const j of seen) weights.append(el("th", fmt(w[j], D), { title: String(w[j]) }));
  const thead = el("thead");
  thead.append(chars, weights);
  const tbody = el("tbody");
  model.forEach((out, m) => {
    const tr = el("tr");
    const terms = seen.map((j) => w[j] * v[j][m]);
    const sum = terms.reduce((p, q) => p + q, 0);
    tr.append(el("td", m, { class: "idx" }),
      el("td", fmt(sum, D), { "data-role": "out-sum", "data-m": m, "data-exact": String(sum) }),
      el("td", fmt(out, D), { "data-role": "model-out", "data-m": m, "data-exact": String(out) }));
    seen.forEach((j, n) => {
      tr.append(el("td", fmt(terms[n], D), { title: `${w[j]} × ${v[j][m]} = ${terms[n]}` }));
    });
    tbody.append(tr);
  });
  table.append(thead, tbody);
  const wrap = el("div", null, { class: "scroll" });
  wrap.append(table);
  nodes.push(wrap);
  return nodes;
}
