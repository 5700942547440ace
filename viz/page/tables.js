// The attention table, the heads side by side, the next character and the what-if
// banner: the top of the page.
"use strict";

function renderChoices(box, label, items, current, onPick) {
  box.replaceChildren(el("span", label));
  for (const [value, text] of items) {
    const button = el("button", text, { type: "button", "aria-pressed": String(value === current) });
    button.dataset.value = value === null ? "average" : String(value);
    button.addEventListener("click", () => onPick(value));
    box.append(button);
  }
}

function renderControls() {
  const layers = [...Array(MODEL.n_layer).keys()].map((l) => [l, String(l)]);
  renderChoices($("layers"), t("choice.layer"), layers, state.layer, (l) => { state.layer = l; pickedHead(); });
  const heads = [[null, t("head.average")], ...[...Array(MODEL.n_head).keys()].map((h) => [h, String(h)])];
  renderChoices($("heads"), t("choice.head"), heads, state.head, (h) => { state.head = h; pickedHead(); });
}

// A new layer or head: under switches the model runs again (they follow the pick),
// else only the steps of the new head are needed.
function pickedHead() {
  state.derivation = null;
  if (state.switches.size > 0 && DATA.served) {
    show(state.result.prompt, { keepPrompt: true });
    return;
  }
  render();
  loadSteps();
}

function renderTable() {
  const { labels } = state.result;
  const weights = headWeights(state.layer, state.head);
  $("table-title").textContent = t("table.title", { layer: state.layer, head: headName(state.head) }) +
    snapshotTag() + whatIfTag();
  // Under "no causal mask" on the head shown, the future is seen: nothing is grey.
  const unmasked = state.head !== null && switchedHere(state.layer, state.head, "no_mask");
  $("table-help").replaceChildren(...rich(unmasked ? "table.help_no_mask" : "table.help"));
  const table = $("attention-table");
  const index = el("tr");
  const chars = el("tr");
  index.append(el("th"), el("th"));
  chars.append(el("th"), el("th"));
  labels.forEach((label, j) => {
    index.append(el("th", j, { class: "idx" }));
    chars.append(el("th", label, { class: "char" }));
  });
  index.append(el("th"));
  chars.append(el("th", t("table.sum")));
  const head = el("thead");
  head.append(index, chars);
  const body = el("tbody");
  weights.forEach((row, i) => {
    const tr = el("tr", null, { "data-row": i });
    if (i === state.row) tr.classList.add("picked");
    tr.append(el("th", i, { class: "idx" }), el("th", labels[i], { class: "char" }));
    row.forEach((w, j) => {
      if (j > i && w === 0) { // the future: weight 0 (unless a what-if lifted the mask)
        tr.append(el("td", formatFixed(w, DECIMALS), { class: "future", title: t("table.future") }));
        return;
      }
      const td = el("td", formatFixed(w, DECIMALS), { title: `${labels[i]} → ${labels[j]}: ${w}` });
      shade(td, w);
      tr.append(td);
    });
    const total = row.reduce((a, b) => a + b, 0);
    tr.append(el("td", formatFixed(total, DECIMALS), { class: "sum", title: String(total) }));
    tr.addEventListener("click", () => { state.row = i; render(); });
    body.append(tr);
  });
  table.replaceChildren(head, body);
}

function renderHeads() {
  const i = state.row;
  const { labels } = state.result;
  $("heads-title").textContent = t("heads.title", { char: quoted(i), layer: state.layer }) + whatIfTag();
  const chars = el("tr");
  chars.append(el("th"));
  for (let j = 0; j <= i; j++) chars.append(el("th", labels[j], { class: "char" }));
  const head = el("thead");
  head.append(chars);
  const body = el("tbody");
  const heads = [...Array(MODEL.n_head).keys(), null];
  for (const h of heads) {
    const tr = el("tr", null, { "data-head": h === null ? "average" : String(h) });
    if (h === state.head) tr.classList.add("picked");
    tr.append(el("th", h === null ? t("head.average") : t("head.name", { head: h })));
    const row = headWeights(state.layer, h)[i];
    for (let j = 0; j <= i; j++) {
      const td = el("td", formatFixed(row[j], DECIMALS), { title: `${labels[j]}: ${row[j]}` });
      shade(td, row[j]);
      tr.append(td);
    }
    tr.addEventListener("click", () => { state.head = h; pickedHead(); });
    body.append(tr);
  }
  $("heads-view").replaceChildren(head, body);
}

function renderNext() {
  const { labels, logits } = state.result;
  const last = labels.length - 1;
  const own = state.result.model; // the model's own numbers, under switches
  $("next-title").textContent = t("next.title", { char: quoted(last) }) + snapshotTag() +
    (own ? t("next.whatif") : "");
  // The answer holds the next-character logits at the last position only: say so when
  // the learner picked another row.
  const note = $("next-position");
  note.hidden = state.row === null || state.row === last;
  note.textContent = note.hidden ? "" : t("next.last_only", { last: quoted(last), picked: quoted(state.row) });
  $("temperature").value = String(state.temperature);
  $("temperature-value").textContent = state.temperature.toFixed(2);
  $("temperature-help").textContent = state.temperature === 0
    ? t("next.greedy")
    : t("next.softmax", { temperature: state.temperature.toFixed(2), vocab: MODEL.vocab.length, top_k: TOP_K });
  const probs = probabilities(logits, state.temperature);
  const ownProbs = own ? probabilities(own.logits, state.temperature) : null;
  const head = el("thead");
  const titles = el("tr");
  for (const key of ["#", "next.character", "next.probability", "", "", ...(own ? ["next.own"] : [])]) {
    titles.append(el("th", key.length > 1 ? t(key) : key));
  }
  head.append(titles);
  const body = el("tbody");
  topK(logits, TOP_K).forEach((id, rank) => {
    const tr = el("tr", null, { "data-id": id });
    const bar = el("td", null, { class: "bar" });
    const fill = el("div", null, { class: "fill" });
    fill.style.width = `${(100 * probs[id]).toFixed(1)}%`;
    bar.append(fill);
    const append = el("button", t("next.append"), { type: "button" });
    append.disabled = !DATA.served;
    append.addEventListener("click", () => extend(MODEL.vocab[id]));
    const cell = el("td");
    cell.append(append);
    tr.append(
      el("td", rank + 1, { class: "idx" }),
      el("td", MODEL.vocab_labels[id], { class: "char" }),
      el("td", probs[id].toFixed(4), { class: "probability", title: String(probs[id]) }),
      bar,
      cell,
    );
    if (own) tr.append(el("td", ownProbs[id].toFixed(4), { class: "own", title: String(ownProbs[id]) }));
    body.append(tr);
  });
  $("next-table").replaceChildren(head, body);
  $("sample").disabled = !DATA.served;
  $("continue-help").textContent = t(DATA.served ? "next.append_help" : "next.append_file");
}

function renderBanner() {
  const banner = $("whatif-banner");
  const w = whatIf();
  document.body.classList.toggle("whatif", Boolean(w));
  banner.hidden = !w;
  if (w) banner.replaceChildren(...rich("whatif.banner", { what: whatIfText(w) }));
  // The page's first words speak of −∞; with the mask switched off they say so instead.
  const unmasked = Boolean(w && w.switches.includes("no_mask"));
  $("honest").replaceChildren(...rich(unmasked ? "page.honest_no_mask" : "page.honest"));
}

// What a what-if pass changed, in the page's language: "layer 0, head 1: no causal mask ...".
function whatIfText(w) {
  const changes = w.switches.map((key) => t(`switch.${key}`)).join("; ");
  return t("whatif.describe", { layer: w.layer, head: w.head, changes });
}
