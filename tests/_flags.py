"""Set an attribute for a while and put its old value back, on objects whose attributes live behind
``__getattr__``/``__setattr__``, as torch's backend flags do (``torch.backends.cuda.matmul.allow_tf32``).

pytest's ``monkeypatch.setattr`` (9.2) records such an attribute as absent (the instance ``__dict__`` has no
entry) and deletes it at teardown, which the object refuses: ``AttributeError: 'cuBLASModule' object has no
attribute 'allow_tf32'``. Here the old value is read and written back through the same attribute."""
import contextlib


@contextlib.contextmanager
def flag(obj, name: str, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)
