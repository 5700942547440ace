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
    box.replaceChildren(el("h3", "Where one number comes from"), el("p",
      "Hover a cell of Q·Kᵀ, ÷√d_k, the mask or the weights: its q and k, their products, " +
      "the scaling, the mask and the softmax appear here. Click to keep it; hover a row of " +
      "weights·V for its sum.", { class: "muted" }));
    return;
  }
  const nodes = [];
  const header = el("div", null, { class: "row" });
  header.append(el("strong", d.locked ? "Kept: click Unlock to follow the mouse again" : "Preview (click a cell to keep it)"));
  if (d.locked) {
    const button = el("button", "Unlock", { type: "button", id: "unlock" });
    button.addEventListener("click", unlock);
    header.append(button);
  }
  nodes.push(header);
  if (EXPLAINED[d.key] === "row") nodes.push(...outDerivation(d.i, steps));
  else if (EXPLAINED[d.key] === "xx") nodes.push(...scoreDerivation(d.i, d.j, xxSource()));
  else nodes.push(...scoreDerivation(d.i, d.j, headSource(steps)));
  box.replaceChildren(el("h3", "Where one number comes from"), ...nodes);
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
    title: "weights", a: xx ? x : steps.q.values, b: xx ? x : steps.k.values,
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
    title: "X·Xᵀ weights", a: L.x.values, b: L.x.values, aName: "x", bName: "x",
    raw: L.xx.values, scaled: null, masked: null, weights: L.xx_weights.values,
    scale: null, mask: true, uniform: false, switched: [], chapter: true,
  };
}

function result(text, role, exact) {
  return el("div", text, { class: "result", "data-role": role, "data-exact": String(exact) });
}

function scoreDerivation(i, j, src) {
  const labels = rowLabels();
  const D = DERIVATION_DECIMALS;
  const nodes = [];
  // Whose numbers the tables hold: X·Xᵀ and a switched head's are not the model's.
  const whose = src.chapter ? "the X·Xᵀ table's" : src.switched.length
    ? "the what-if table's" : "the model's";
  nodes.push(el("p", `Cell (${i}, ${j}): '${labels[i]}' (row ${i}, the query) and ` +
    `'${labels[j]}' (column ${j}, the key)` + (src.chapter ? ", the chapter's first form: X·Xᵀ, no learned projections" : "")));
  if (src.switched.length) {
    nodes.push(el("p", `What-if on this head: ${src.switched.join(", ")}`, { class: "whatif-tag" }));
  }
  // 1. the dot product
  const a = src.a[i];
  const b = src.b[j];
  nodes.push(el("h4", `1. ${src.aName}_${i} · ${src.bName}_${j}: multiply channel by channel, add`));
  // Long vectors in two halves side by side, to keep the panel short.
  const half = a.length > 16 ? Math.ceil(a.length / 2) : a.length;
  const products = el("table", null, { class: "weights", "data-role": "products" });
  const titles = el("tr");
  for (let part = 0; part < Math.ceil(a.length / half); part++) {
    for (const t of ["ch", `${src.aName}_${i}`, `${src.bName}_${j}`, "product"]) titles.append(el("th", t));
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
  nodes.push(result(`sum = ${fmt(sum, D)}`, "sum", sum));
  nodes.push(result(`${whose} score: ${fmt(raw, D)}`, "model-score", raw));
  // 2. the scale
  let scaled = raw;
  if (src.scaled) {
    scaled = src.scaled[i][j];
    nodes.push(el("h4", "2. ÷ √d_k"));
    if (src.scale === null) {
      nodes.push(el("p", "Switched off (what-if): the score goes on as it is.", { class: "whatif-tag" }));
    } else {
      nodes.push(result(`${fmt(raw, D)} ÷ √${state.steps.d_k} = ${fmt(raw, D)} ÷ ${fmt(src.scale, D)} = ` +
        `${fmt(raw / src.scale, D)}`, "scaled", raw / src.scale));
    }
    nodes.push(result(`${whose} ÷ √d_k: ${fmt(scaled, D)}`, "model-scaled", scaled));
  }
  // 3. the mask
  nodes.push(el("h4", `${src.scaled ? 3 : 2}. the causal mask`));
  const future = j > i;
  let maskText;
  if (!src.mask) maskText = "Switched off (what-if): the future stays visible.";
  else if (future) maskText = `j = ${j} > i = ${i}: '${labels[j]}' comes after '${labels[i]}', the future. ` +
    "The mask writes −∞ here, before the softmax; exp(−∞) = 0, so its weight is 0.";
  else maskText = `j = ${j} ≤ i = ${i}: '${labels[j]}' is not in the future; the mask leaves it.`;
  nodes.push(el("p", maskText, { "data-role": "mask" }));
  // 4. the softmax over row i
  const rowScores = src.masked ? src.masked[i] : src.raw[i].map((x, jj) => (jj > i ? null : x));
  const visible = rowScores.map((x, jj) => [jj, x]).filter(([, x]) => x !== null);
  nodes.push(el("h4", `${src.scaled ? 4 : 3}. softmax over row ${i}`));
  const weightModel = src.weights[i][j];
  if (src.uniform) {
    const w = rowScores[j] === null ? 0 : 1 / visible.length;
    nodes.push(el("p", `Uniform weights (what-if): each of the ${visible.length} characters row ${i} ` +
      `sees gets 1 / ${visible.length}.`, { class: "whatif-tag" }));
    nodes.push(result(`weight = ${fmt(w, D)}`, "weight", w));
    nodes.push(result(`${whose} weight: ${fmt(weightModel, D)}`, "model-weight", weightModel));
    return nodes;
  }
  const top = Math.max(...visible.map(([, x]) => x));
  const shift = top > 80 ? top : 0; // exp(x) overflows past about 709
  const exps = new Map(visible.map(([jj, x]) => [jj, Math.exp(x - shift)]));
  const total = [...exps.values()].reduce((p, q) => p + q, 0);
  const expName = shift ? `exp(s − ${fmt(shift, D)})` : "exp(s)";
  if (shift) {
    nodes.push(el("p", `The scores are large: each is lowered by the row's largest (${fmt(shift, D)}) ` +
      "before exp, which leaves the ratios, and so the weights, as they are.", { class: "muted" }));
  }
  const soft = el("table", null, { class: "weights", "data-role": "softmax" });
  const head = el("tr");
  for (const t of ["j", "", "s", expName]) head.append(el("th", t));
  const shead = el("thead");
  shead.append(head);
  const sbody = el("tbody");
  rowScores.forEach((x, jj) => {
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
  nodes.push(result(`row total = ${fmt(total, D)}`, "total", total));
  const mine = rowScores[j] === null ? 0 : exps.get(j);
  const w = mine / total;
  nodes.push(result(`weight = ${fmt(mine, D)} ÷ ${fmt(total, D)} = ${fmt(w, D)}`, "weight", w));
  nodes.push(result(`${whose} weight: ${fmt(weightModel, D)}`, "model-weight", weightModel));
  return nodes;
}

// Row i of weights·V: each visible v_j times its weight, and their sum.
function outDerivation(i, steps) {
  const labels = rowLabels();
  const D = DERIVATION_DECIMALS;
  const w = steps.weights.values[i];
  const v = steps.v.values;
  const model = steps.out.values[i];
  const seen = [...Array(labels.length).keys()].filter((j) => w[j] !== 0);
  const nodes = [el("p", `Row ${i} of weights·V: what '${labels[i]}' takes from the values ` +
    `it attends to: out_${i} = Σ_j weights[${i}][j] · v_j, channel by channel ` +
    "(columns with weight 0 left out).")];
  const table = el("table", null, { class: "weights", "data-role": "weighted-sum" });
  const chars = el("tr");
  // A switched head's row is the what-if pass's, not the model's.
  const whose = headSwitches().length ? "the what-if's" : "the model's";
  chars.append(el("th", "channel"), el("th", "sum"), el("th", whose));
  for (const j of seen) chars.append(el("th", `${j} ${labels[j]}`, { class: "char" }));
  const weights = el("tr");
  weights.append(el("th"), el("th"), el("th", "weight:"));
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
