"""Attention explorer: how much each character of a prompt attends to each earlier one.

    python explore_attention.py --out-dir runs/korean --prompt "새가 하늘을 날았다"
    python explore_attention.py --out-dir runs/shakespeare_char_cpu \\
        --prompt "To be, or not to be" --layer 0 --head 2
    python explore_attention.py --out-dir runs/korean --serve       # a page to click through
    python explore_attention.py --out-dir runs/korean --prompt "새가 하늘을" \\
        --html runs/korean/attention.html                            # the page as one file
    python explore_attention.py --out-dir runs/korean --prompt "새가 하늘을 날았다" \\
        --steps --layer 0 --head 1                                   # every step of one head
    python explore_attention.py --out-dir runs/korean_from_shakespeare --prompt "ROMEO:" \\
        --compare runs/shakespeare_char_cpu                          # two models side by side

Prints the attention weights of one layer, for one head or the average of its heads,
as a table: rows are the current character, columns the characters it attends to,
each row sums to 1, and the masked future is blank. Writes a PNG grid of heatmaps,
every layer (down) by every head (across), with the characters on the axes.
The weights are the model's own, from model/gpt.py's explicit_attention.

--serve starts a local web page instead (viz/attention_server.py): type a prompt, pick a
layer and head, click a character to compare the heads, see the next-character
distribution at any temperature and append a character to continue. --html FILE writes
that page for --prompt as one self-contained file (no server, no network).

--steps prints every step of self-attention for one head instead (--layer, --head:
default the last layer, head 0), in the Korean chapters' order: X, X·Xᵀ, Q, K, V, the
raw Q·Kᵀ, ÷√d_k, the mask (−∞), the softmax weights, weights·V, the heads concatenated,
× W_o and the residual stream after the add. Then the same tables per word (a prompt
with spaces), the head's W_q, W_k, W_v with one cell of X·W_q worked out (--cell), the
rest of the block (the residual stream before and after, the second norm, the MLP)
with one neuron worked out (--neuron-cell), what each head and MLP pushes on the
predicted next character, and what each layer would predict next. The numbers are the
page's (viz/attention_steps.py, viz/steps_extras.py): one eval-mode forward pass of the
real weights. --switches shows a what-if pass instead (see the page's switches; the
block's zero_head, zero_mlp, and zero_neuron with --neuron).

--lang ko or en: the language of --steps (default English) and of the page (default the
browser's; the page has a switch too). Both read one catalogue, viz/page/messages.json.

--compare OTHER prints the same prompt through this model (A) and another (B: a run
folder's ckpt.pt, or a checkpoint file), e.g. a fine-tuned run and its parent: both
next-character tables, what each layer would predict, and how much each head's
weights differ, with the differences marked (viz/model_compare.py). With --serve the
page shows both models side by side for each prompt it shows (POST /api/compare).

--at-step N uses the run's snapshot nearest training step N (train.snapshots) in place
of the checkpoint, for the table, --steps and --html: the model as it was then. --serve
offers every snapshot to the page (GET /api/snapshots; a request's "step" field): a
slider over training above the tables, and how a head's weights moved between two.
"""

import argparse
import sys
from pathlib import Path

import torch

from cli.checkpoint_args import add_checkpoint_arguments, resolve_checkpoint_path
from cli.console import discard_stdout, run_command
from cli.figure_file import figure_path, save_figure
from cli.flag_hints import explain_unknown_flags
from data import CorpusError
from data.decoding import normalize_newlines
from data.escapes import ESCAPES_HELP, unescape_argument
from model.checkpoint import CheckpointError, load_checkpoint, model_from_checkpoint
from model.device import resolve_device
from viz.attention_presets import run_prompts
from viz.attention_server import AttentionExplorer, ExplorerServer, PromptError, render_page
from viz.attention_steps import BLOCK_SWITCHES, SWITCHES, attention_steps
from viz.attention_table import format_attention_table, format_steps
from viz.attention_weights import prompt_attention, select_head
from viz.block_steps import block_steps
from viz.char_labels import visible_char
from viz.head_projections import projection_steps
from viz.logit_lens import layer_predictions
from viz.messages import LANGUAGES, say
from viz.model_compare import ComparedModel, compare_models, format_comparison
from viz.snapshot_explorers import SnapshotExplorers
from viz.snapshots import nearest_snapshot
from viz.steps_extras import EXTRAS, extras_json
from viz.steps_text import (
    format_attribution,
    format_block,
    format_cell,
    format_columns,
    format_neuron,
    format_words,
)


def parse_layers(text: str, n_layer: int) -> list[int]:
    """'all' -> [0, ..., n_layer-1]; '0,2' -> [0, 2].

    Raises:
        ValueError: for a non-number or a layer outside 0..n_layer-1.
    """
    if text == "all":
        return list(range(n_layer))
    try:
        layers = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--png-layers must be all or numbers like 0,2, got {text!r}") from None
    if not all(0 <= layer < n_layer for layer in layers):
        raise ValueError(f"--png-layers must be in 0..{n_layer - 1}, got {text!r}")
    return layers


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of explore_attention.py."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_checkpoint_arguments(p)
    p.add_argument(
        "--prompt",
        default=None,
        help="text to look at (at most block_size chars); with --serve optional: the page "
        f"asks; {ESCAPES_HELP} (as sample.py reads them)",
    )
    p.add_argument(
        "--layer", type=int, default=-1, help="layer of the table, 0-based (default -1: last)"
    )
    p.add_argument(
        "--head", type=int, default=None, help="head of the table, 0-based (default: average)"
    )
    p.add_argument("--png", default=None, help="heatmap grid (default: OUT_DIR/attention.png)")
    p.add_argument(
        "--png-layers",
        default="all",
        help="layers (rows) of the PNG: all, or 0-based numbers such as 0 or 0,2",
    )
    p.add_argument("--dpi", type=int, default=150, help="PNG resolution, dots per inch")
    p.add_argument("--decimals", type=int, default=2, help="digits after the point in the table")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    p.add_argument("--html", default=None, help="also write the web page for --prompt to this file")
    p.add_argument(
        "--steps",
        action="store_true",
        help="print every step of self-attention for --layer and --head (default head 0) "
        "instead of the weights table; writes no PNG unless --png is given",
    )
    p.add_argument(
        "--columns",
        type=int,
        default=16,
        help="--steps: columns shown of a wide table such as X (n_embd of them); 0: all",
    )
    p.add_argument(
        "--switches",
        default="",
        help="--steps: what-if switches for that head, comma-separated "
        f"({','.join([*SWITCHES, *BLOCK_SWITCHES])}); the tables are then not what the "
        "model computes",
    )
    p.add_argument(
        "--neuron", type=int, default=None, help="--steps: the MLP neuron zero_neuron zeroes"
    )
    p.add_argument(
        "--cell",
        default=None,
        help="--steps: the cell of X·W_q (or W_k, W_v) to work out, PART,ROW,COLUMN such as "
        "q,3,0 (default: q, the last character, channel 0)",
    )
    p.add_argument(
        "--neuron-cell",
        default=None,
        help="--steps: the MLP neuron to work out, ROW,NEURON such as 3,17 (default: the "
        "last character's most active neuron)",
    )
    p.add_argument(
        "--lang",
        choices=LANGUAGES,
        default=None,
        help="language of --steps (default en) and of the page (default: the browser's)",
    )
    p.add_argument(
        "--compare",
        default=None,
        metavar="OTHER",
        help="print --prompt through this model and another (a run folder or a checkpoint "
        "file) side by side, the differences marked; with --serve, on the page",
    )
    p.add_argument(
        "--at-step",
        type=int,
        default=None,
        help="use the run's snapshot nearest this training step (OUT_DIR/snapshots) "
        "instead of the checkpoint: the model as it was then",
    )
    p.add_argument("--serve", action="store_true", help="serve the web page until Ctrl-C")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address --serve listens on (default 127.0.0.1: this machine only; 0.0.0.0 "
        "shows the model to the whole network)",
    )
    p.add_argument("--port", type=int, default=8000, help="--serve's port (0: any free port)")
    return p


def check_modes(args: argparse.Namespace) -> None:
    """The flags that do not depend on the model; reads --prompt's escapes
    (`data.escapes`, as sample.py does) into ``args.prompt``.

    Raises:
        ValueError: naming the flag to change.
    """
    if args.dpi <= 0 or args.decimals < 0:
        raise ValueError("--dpi must be > 0 and --decimals >= 0")
    if args.columns < 0:
        raise ValueError(f"--columns must be >= 0 (0: all), got {args.columns}")
    if args.switches and not args.steps:
        raise ValueError("--switches changes the --steps tables: add --steps")
    for flag, value in (("--neuron", args.neuron), ("--cell", args.cell)):
        if value is not None and not args.steps:
            raise ValueError(f"{flag} is for the --steps tables: add --steps")
    if args.neuron_cell is not None and not args.steps:
        raise ValueError("--neuron-cell is for the --steps tables: add --steps")
    if args.steps and (args.serve or args.html):
        raise ValueError("--steps prints the steps; the page (--serve, --html) shows them too")
    if args.prompt is None and not args.serve:
        raise ValueError("--prompt is required (with --serve it is optional: the page asks)")
    if args.prompt is not None:
        args.prompt = normalize_newlines(unescape_argument("--prompt", args.prompt))
    if args.serve and args.html:
        raise ValueError("--html writes the page for one prompt without a server; drop --serve")
    if args.compare is not None and (args.html or args.steps):
        raise ValueError(
            "--compare prints its comparison, or with --serve shows it on the page: "
            "drop --html and --steps"
        )
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535 (0: any free port), got {args.port}")


def open_server(
    host: str,
    port: int,
    explorer: AttentionExplorer,
    prompt: str | None,
    lang: str | None = None,
    snapshots=None,
    compare: ComparedModel | None = None,
) -> ExplorerServer:
    """Bind the page's server (not yet answering: see `serve`).

    Raises:
        ValueError: if the address cannot be bound (port in use, unknown host), or
            ``prompt`` cannot be shown (the page's message).
    """
    try:
        return ExplorerServer((host, port), explorer, prompt, lang, snapshots, compare)
    except OSError as e:
        raise ValueError(
            f"cannot listen on {host}:{port} ({e.strerror or e}); "
            "pick another --port (0: any free port) or --host"
        ) from None


def serve(server: ExplorerServer) -> int:
    """Answer the page's requests until Ctrl-C; returns the exit status (0)."""
    compared = "" if server.compare is None else f", compared with {server.compare.label}"
    print(f"attention explorer for {server.explorer.name}{compared} at {server.url}", flush=True)
    print("open it in a browser; Ctrl-C stops the server", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()
    return 0


def print_steps(explorer: AttentionExplorer, args: argparse.Namespace, path: Path) -> int:
    """--steps: print every step of one head, then what each layer would predict after
    the last character; returns the exit status (2 on bad input)."""
    head = 0 if args.head is None else args.head
    switches = [s for s in args.switches.split(",") if s]
    config = explorer.model.config
    try:
        prompt, ids, notes = explorer.prepare(args.prompt)
        what_if = explorer.what_if(args.layer, head, switches, args.neuron)
        record = explorer.forward(ids, what_if)
        steps = attention_steps(record, args.layer, head)
        layer = args.layer % config.n_layer
        last = len(prompt) - 1
        # Defaults: Q of the last character, channel 0; its most active neuron.
        neuron = int(record.layers[layer]["act"][0, last].abs().argmax())
        cell = args.cell if args.cell is not None else f"q,{last},0"
        neuron_cell = args.neuron_cell if args.neuron_cell is not None else f"{last},{neuron}"
        extras = extras_json(
            explorer.model,
            record,
            prompt,
            layer,
            head,
            EXTRAS,
            cell,
            neuron_cell,
            explorer.tokenizer.chars,
        )
    except (PromptError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    lens = layer_predictions(explorer.model, record, top_k=5)
    chars = explorer.tokenizer.chars
    lang = args.lang or "en"
    try:
        for note in notes:
            print(say(note, lang))
        n_layer, n_head = config.n_layer, config.n_head
        where = {"path": path, "layer": layer, "head": head}
        print(say("cli.where", lang, **where, last_layer=n_layer - 1, last_head=n_head - 1))
        if what_if is not None:
            print(say("cli.whatif", lang, what=what_if.describe(lang)))
        # Under a switch the −∞ of the mask may be gone: the line says what is shown.
        honest = "cli.honest" if what_if is None else "cli.honest_whatif"
        print(say(honest, lang, decimals=args.decimals))
        print()
        print(format_steps(steps, prompt, args.decimals, args.columns, lang))
        print()
        print_extras(explorer, extras, record, prompt, layer, head, args)
        position = len(prompt) - 1
        print(say("cli.lens", lang, char=repr(visible_char(prompt[-1])), position=position))
        for layer_index, (top, probs) in enumerate(
            zip(lens["ids"], lens["probabilities"], strict=True)
        ):
            shown = "  ".join(
                f"{visible_char(chars[i])} {p:.{args.decimals}f}"
                for i, p in zip(top[-1], probs[-1], strict=True)
            )
            print("  " + say("cli.after_block", lang, layer=layer_index, shown=shown))
    except BrokenPipeError:  # e.g. `| head`: the reader left, nothing to report
        discard_stdout()
    return 0


def load_compared(compare: str, device) -> ComparedModel:
    """--compare's model: a run folder's ckpt.pt, or a checkpoint file.

    Raises:
        CheckpointError: for a path that holds no checkpoint.
    """
    other = Path(compare)
    other = other / "ckpt.pt" if other.is_dir() else other
    if not other.is_file():
        raise CheckpointError(f"--compare {compare}: no checkpoint there")
    model, tokenizer = model_from_checkpoint(load_checkpoint(other, device), other)
    return ComparedModel(str(other), model.to(device).eval(), tokenizer)


def print_comparison(explorer: AttentionExplorer, args, path: Path, device) -> int:
    """--compare: the prompt through the explorer's model and the other one, as text.

    Raises:
        CheckpointError: for an --compare path that holds no checkpoint.
    """
    first = ComparedModel(str(path), explorer.model, explorer.tokenizer)
    result = compare_models(first, load_compared(args.compare, device), args.prompt)
    print(format_comparison(result))
    return 0


def print_extras(
    explorer: AttentionExplorer, extras: dict, record, prompt: str, layer: int, head: int, args
) -> None:
    """--steps, after the attention's steps: the tables per word (for a prompt with
    spaces), the head's W_q, W_k, W_v and a cell of X·W_q, the rest of the block and a
    neuron, and what each part pushes on the predicted next character."""
    decimals, columns, lang = args.decimals, args.columns, args.lang or "en"
    options = (decimals, columns, lang)
    sections = []
    if len(extras["words"]["words"]) > 1:
        sections.append(format_words(extras["words"], *options, layer=layer, head=head))
    projections = extras["projections"]
    sections.append(format_columns(projections["columns"], head, *options))
    chapter_form = projection_steps(explorer.model, record, layer, head)
    sections.append(format_steps(chapter_form, prompt, *options))
    sections.append(format_cell(extras["cell"], prompt, *options))
    sections.append(format_block(block_steps(record, layer), prompt, *options))
    sections.append(format_neuron(extras["neuron_cell"], prompt, *options))
    sections.append(format_attribution(extras["attribution"], max(decimals, 3), lang))
    for section in sections:
        print(section)
        print()


def main(argv: list[str] | None = None) -> int:
    """Print the table, write the PNG (and --html), or --serve the page until Ctrl-C;
    returns the exit status (2 on bad input)."""
    args = explain_unknown_flags(build_parser()).parse_args(argv)
    try:
        check_modes(args)
        device = resolve_device(args.device)
        path = resolve_checkpoint_path(args.out_dir, args.checkpoint)
        if args.at_step is not None:  # the snapshot nearest that step (viz.snapshots)
            path, entry = nearest_snapshot(path.parent, args.at_step)
            print(f"snapshot at step {entry['step']} (val loss {entry['val_loss']:.3f} nats/char)")
        checkpoint = load_checkpoint(path, map_location=device)
        model, tokenizer = model_from_checkpoint(checkpoint, path)
        explorer = AttentionExplorer(
            model.to(device),
            tokenizer,
            str(path),
            run_prompts(checkpoint.get("config")),
            checkpoint.get("iter_num"),
        )
        if args.serve:  # a --prompt is the page's first; one too long is cropped there
            snapshots = SnapshotExplorers(path.parent, device, explorer.own_text)
            other = None if args.compare is None else load_compared(args.compare, device)
            server = open_server(
                args.host, args.port, explorer, args.prompt, args.lang, snapshots, other
            )
            return serve(server)
        if args.steps:
            return print_steps(explorer, args, path)
        if args.compare is not None:
            return print_comparison(explorer, args, path, device)
        args.prompt = tokenizer.normalize(args.prompt)  # the characters the model reads
        block_size = model.config.block_size
        if not 1 <= len(args.prompt) <= block_size:
            raise ValueError(
                f"--prompt must have 1 to {block_size} characters (the model's block_size), "
                f"got {len(args.prompt)}"
            )
        ids = torch.from_numpy(tokenizer.encode(args.prompt).astype("int64"))
        weights = prompt_attention(model.to(device), ids)
        table = select_head(weights, args.layer, args.head)
        png_layers = parse_layers(args.png_layers, weights.size(0))
        png = figure_path(args.png, Path(args.out_dir) / "attention.png")
    except (ValueError, CheckpointError, CorpusError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n_layer, n_head = weights.shape[:2]
    # The files first: a reader that stops reading the table (| head) must not cost them.
    # matplotlib is imported for the picture only: loading the model does without it.
    from viz.attention_plot import attention_grid_figure

    fig = attention_grid_figure(
        weights[png_layers], args.prompt, layers=png_layers, title=f"{path}: {args.prompt!r}"
    )
    if error := save_figure(fig, png, args.dpi):
        print(error, file=sys.stderr)
        return 2
    if args.html:
        html = Path(args.html)
        html.parent.mkdir(parents=True, exist_ok=True)
        result, steps = explorer.explain(args.prompt), explorer.all_steps(args.prompt)
        info = explorer.model_info()
        page = render_page(info, result, served=False, steps=steps, lang=args.lang)
        html.write_text(page, encoding="utf-8")
    which = f"head {args.head}" if args.head is not None else f"average of {n_head} heads"
    rows = f"{len(png_layers)} layer" + ("s" if len(png_layers) != 1 else "")
    # A reader that leaves early (`| head`) ends the command quietly (cli.console).
    print(f"{path}: layer {args.layer % n_layer} of 0..{n_layer - 1}, {which}")
    print("rows: current character; columns: the characters it attends to; blank: future")
    print(format_attention_table(table, args.prompt, args.decimals))
    print(f"wrote {png}: {rows} x {n_head} heads", flush=True)
    if args.html:
        print(f"wrote {args.html}: open it in a browser (no server needed)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
