"""Export scope: all data, or one model's iterations (`--model-id M --iteration-id I
[--iteration-count N]`), with the reference's validation rules (outputs.md §1.2, §1.4;
device_formats.md §6.2; docs/research/iteration_export.md)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import BadOption, InvalidIteration
from ..store import iterations
from .context import ExportContext, Iteration, Scope

SINGLE_OP_MODEL = 4294967295
MAX_ITERATION_COUNT = 5


def check_options(model_id: Optional[int], iteration_id: Optional[int]) -> None:
    """The combination rule checked before anything is read."""
    if (model_id is None) != (iteration_id is None):
        raise BadOption("Please set 'model-id' and 'iteration-id' simultaneously (use 'msprof-kit query' to "
                        "see the valid model and iteration ids)")


def step_iterations(ctx: ExportContext) -> Dict[int, List[Tuple[int, int, int, int]]]:
    """Per device: (model id, iteration index, start ns, end ns) from the store's step trace."""
    if not ctx.has("KIT_STEP_TRACE"):
        return {}
    out: Dict[int, List[Tuple[int, int, int, int]]] = {}
    rows = ctx.conn.execute("SELECT deviceId, modelId, timestampNs, tagId FROM KIT_STEP_TRACE").fetchall()
    for dev in sorted({r[0] for r in rows}):
        out[dev] = iterations([(m, t, g) for d, m, t, g in rows if d == dev])
    return out


def resolve(ctx: ExportContext, model_id: Optional[int], iteration_id: Optional[int],
            count: int = 1) -> Scope:
    """The scope of an export; raises BadOption / InvalidIteration with the reference's messages."""
    check_options(model_id, iteration_id)
    if model_id is None:
        return Scope()
    its = step_iterations(ctx)
    models = sorted({m for per in its.values() for m, *_ in per if m != SINGLE_OP_MODEL})
    if not models:
        raise BadOption("Please do not set 'model-id' and 'iteration-id' in single op mode")
    if model_id not in models:
        raise BadOption(f"The model id {model_id} is invalid. Must select from {{{', '.join(map(str, models))}}}. "
                        f"Please enter a valid model id")
    assert iteration_id is not None
    chosen: Dict[int, List[Iteration]] = {}
    for dev, per in its.items():
        mine = [r for r in per if r[0] == model_id]
        if not mine:
            continue
        first, last = min(r[1] for r in mine), max(r[1] for r in mine)
        end_id = iteration_id + count - 1
        if iteration_id < first or end_id > last:
            raise InvalidIteration(f"The exported iteration {iteration_id}-{end_id} is invalid for model id "
                                   f"{model_id}. Please enter a valid iteration within {first}-{last}")
        if count < 1 or count > MAX_ITERATION_COUNT:
            raise InvalidIteration(f"The iteration count {count} is invalid for model id {model_id}. Must be "
                                   f"greater than 0 and less than or equal to {MAX_ITERATION_COUNT}. Please enter "
                                   f"a valid iteration count")
        # each iteration's window opens where the previous iteration (of any model) ended, or at 0
        chosen[dev] = [(index, start, end, max((e for _, _, _, e in per if e < start), default=0))
                       for _, index, start, end in mine if iteration_id <= index <= end_id]
    return Scope(model_id=model_id, iteration_id=iteration_id, iteration_count=count, iterations=chosen)
