"""The shipped type stubs (`sagittadb/_native.pyi`) describe the compiled module: every
class, function and method in the stubs exists at run time with the same parameter names
and defaults, and every public runtime name has a stub."""

import ast
import inspect
from pathlib import Path

import sagittadb
import sagittadb._native as native

STUBS = Path(sagittadb.__file__).with_name("_native.pyi")
PY_TYPED = Path(sagittadb.__file__).with_name("py.typed")


def stub_signatures():
    tree = ast.parse(STUBS.read_text())
    functions, classes = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = {
                item.name: item
                for item in node.body
                if isinstance(item, ast.FunctionDef)
            }
    return functions, classes


def parameters(function: ast.FunctionDef) -> list:
    """(name, default source) pairs of a stub function, `self` left out."""
    arguments = function.args
    names = [argument.arg for argument in arguments.args]
    defaults = [None] * (len(names) - len(arguments.defaults)) + [
        ast.unparse(default) for default in arguments.defaults
    ]
    return [
        (name, default)
        for name, default in zip(names, defaults, strict=True)
        if name != "self"
    ]


def runtime_parameters(target) -> list:
    signature = inspect.signature(target)
    return [
        (name, None if p.default is inspect.Parameter.empty else repr(p.default))
        for name, p in signature.parameters.items()
        if name != "self"
    ]


def test_stubs_ship_with_the_package():
    assert STUBS.is_file() and PY_TYPED.is_file()


def test_every_stubbed_signature_matches_the_compiled_module():
    functions, classes = stub_signatures()
    for name, function in functions.items():
        assert runtime_parameters(getattr(native, name)) == parameters(function), name
    for class_name, methods in classes.items():
        runtime_class = getattr(native, class_name)
        for method_name, method in methods.items():
            if any(getattr(d, "id", None) == "property" for d in method.decorator_list):
                assert inspect.isdatadescriptor(getattr(runtime_class, method_name)), (
                    f"{class_name}.{method_name}"
                )
                continue
            if method_name == "__init__":
                target = runtime_class
            else:
                target = getattr(runtime_class, method_name)
            if method_name in ("__len__", "__init__") and not parameters(method):
                continue
            assert runtime_parameters(target) == parameters(method), (
                f"{class_name}.{method_name}"
            )


def test_every_public_runtime_name_has_a_stub():
    functions, classes = stub_signatures()
    stubbed = set(functions) | set(classes) | {"__version__"}
    public = {name for name in dir(native) if not name.startswith("_")} | {
        "__version__"
    }
    assert public <= stubbed, sorted(public - stubbed)
    for class_name in classes:
        runtime_class = getattr(native, class_name)
        if issubclass(runtime_class, BaseException):
            continue
        runtime_methods = {
            name
            for name in vars(runtime_class)
            if not name.startswith("_") or name == "__len__"
        }
        assert runtime_methods <= set(classes[class_name]), (
            class_name,
            sorted(runtime_methods - set(classes[class_name])),
        )
