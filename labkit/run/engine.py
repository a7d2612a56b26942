"""labkit's papermill engine: papermill's nbclient engine, with each cell's printed text capped and the cell
that was running when a run stopped (a timeout, a kernel that died) named on the exception.

A debug ``print`` in a function a lab calls thousands of times would otherwise put every line into the
executed notebook (hundreds of MB); past ``CAP`` characters a cell keeps one line saying its output was cut.
"""
from __future__ import annotations

import copy

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines
from papermill.log import logger
from papermill.utils import merge_kwargs, remove_args

NAME = "labkit"
CAP = 2 * 2 ** 20


class CappedClient(PapermillNotebookClient):
    """Streams beyond ``CAP`` characters a cell are dropped; ``running`` is the index of the cell last started."""

    running: int | None = None

    def execute_cell(self, cell, cell_index, *args, **kwargs):
        self.running = cell_index
        return super().execute_cell(cell, cell_index, *args, **kwargs)

    def output(self, outs, msg, display_id, cell_index):
        if msg.get("msg_type") == "stream":
            used = getattr(self, "_printed", {}).get(cell_index, 0)
            text = msg["content"].get("text", "")
            self.__dict__.setdefault("_printed", {})[cell_index] = used + len(text)
            if used >= CAP:
                return None
            if used + len(text) > CAP:
                msg = copy.deepcopy(msg)
                msg["content"]["text"] = (text[:CAP - used] + f"\n[labkit] output cut: this cell printed more than "
                                          f"{CAP // 2 ** 20} MB; the rest was dropped\n")
        return super().output(outs, msg, display_id, cell_index)


class CappedEngine(NBClientEngine):
    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None,
                                 start_timeout=60, execution_timeout=None, **kwargs):
        kwargs = remove_args(["input_path"], **kwargs)
        safe_kwargs = remove_args(["timeout", "startup_timeout"], **kwargs)
        final_kwargs = merge_kwargs(safe_kwargs, timeout=execution_timeout if execution_timeout else
                                    kwargs.get("timeout"), startup_timeout=start_timeout, kernel_name=kernel_name,
                                    log=logger, log_output=log_output, stdout_file=stdout_file,
                                    stderr_file=stderr_file)
        client = CappedClient(nb_man, **final_kwargs)
        try:
            return client.execute()
        except BaseException as err:
            err.labkit_cell = client.running  # which cell stopped the run
            raise


papermill_engines.register(NAME, CappedEngine)
