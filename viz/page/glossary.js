// The glossary: the terms the page uses that the chapters do not teach, one or two
// sentences each (glossary.<term>.name / .text in the catalogue). Captions link to an
// entry with [[term|words]] (i18n.js); a link opens the entry at the top of the window.
"use strict";

const GLOSSARY_TERMS = ["residual", "norm", "embedding", "position", "rope", "qk_norm",
  "heads", "w_o", "block", "mlp", "lm_head", "logit_lens", "temperature", "channel", "nats"];

function renderGlossary() {
  const list = $("glossary");
  const nodes = [];
  for (const term of GLOSSARY_TERMS) {
    nodes.push(el("dt", t(`glossary.${term}.name`), { id: `glossary-${term}` }));
    nodes.push(richEl("dd", `glossary.${term}.text`));
  }
  list.replaceChildren(...nodes);
}
