// What each layer would predict (the logit lens).
"use strict";

function renderLens() {
  const lens = state.result.lens;
  const last = state.result.labels.length - 1;
  const positions = state.row !== null && state.row !== last ? [last, state.row] : [last];
  const nodes = [];
  for (const p of positions) {
    nodes.push(el("h3", t(p === last ? "lens.after_last" : "lens.after_row", { char: quoted(p) }) + whatIfTag()));
    const table = el("table", null, { class: "weights", "data-position": p });
    const head = el("tr");
    head.append(richEl("th", "lens.residual"));
    for (let r = 1; r <= LENS_SHOWN; r++) head.append(el("th", `#${r}`));
    const thead = el("thead");
    thead.append(head);
    const tbody = el("tbody");
    lens.ids.forEach((layerIds, l) => {
      const tr = el("tr", null, { "data-layer": l });
      const name = l < lens.ids.length - 1 ? t("lens.after_block", { layer: l })
        : t(whatIf() ? "lens.last_whatif" : "lens.last_model", { layer: l });
      tr.append(el("th", name));
      layerIds[p].slice(0, LENS_SHOWN).forEach((id, r) => {
        const probability = lens.probabilities[l][p][r];
        const td = el("td", null, { title: String(probability), "data-id": id });
        td.append(el("span", MODEL.vocab_labels[id], { class: "char" }),
          document.createTextNode(` ${probability.toFixed(4)}`));
        shade(td, probability);
        tr.append(td);
      });
      tbody.append(tr);
    });
    table.append(thead, tbody);
    nodes.push(table);
    // Under a what-if, the model's own prediction beside the what-if's.
    const own = whatIf() && state.result.model;
    if (own) {
      const change = (own.changed || []).find((c) => c.position === p);
      nodes.push(el("p", change
        ? t("lens.own_changed", { own: MODEL.vocab_labels[change.own], whatif: MODEL.vocab_labels[change.what_if] })
        : t("lens.own_same"), { class: "muted", "data-role": "own-prediction", "data-position": p }));
    }
  }
  $("lens").replaceChildren(...nodes);
}
