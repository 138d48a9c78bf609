"""Thirtieth session: requests a user makes while typing, through the real server over stdio
(qwen2.5-coder-0.5b, dtype auto, default settings but no debounce), to look for answers that are
plainly wrong (as the Angular import in an empty file was, or ``os.path.jo(`` before healing took
back more than one token)::

    python docs/bench/probes-s30/user_flows.py [BATCH]

BATCH 1 (the default: imports, an f-string, a decorator, a comment, a dict, a method, a new
function, JavaScript, Go, a docstring, a keyword argument, CRLF) or 2 (a half-typed attribute,
the middle of a function, a call before a comment, TypeScript, Rust, an if block, keyword
arguments, a list comprehension, Go with tabs, an empty line after a docstring) or 3 (mid-line
inside quotes, brackets and template strings, Go and Rust blocks, a lambda, code right of the
cursor, an attribute) or 4 (blocks with code below: between two functions, before a return,
an else branch, a call's next argument, a test body, an except clause, a JS object, a docstring's
Args, after a TODO, inside a loop) or 5 (C, Java, Lua, shell, Ruby, PHP, Kotlin, C++, C#, Swift) or
6 (type hints, a dataclass field, SQL in a string, HTML, CSS, YAML, JSON, an async with, a
closing f-string, a typing import with the names used below) or 7 (thirty-fifth session: right
after an opener with its auto-closed closer right of the cursor: a call below one laid out on
lines, ``add_argument``, ``setup``, ``subprocess.run``, a ``fetch`` options object, a returned
dict) or 8 (the same in other places and languages: a list, a Go struct literal, a Rust
``vec!``, a JS object, a ``def``'s parameters, one-line calls, a JSON object, a C condition)
or 9 (code right of the cursor: an argument inserted before others, a method chain, a
ternary's else, a comment's end, an empty call, indexing, a lambda) or 10 (after an opener in
other languages and places: a JS template's ``${|}``, a Go ``if``'s braces, a TS arrow body,
a Rust ``match``, a Java class body, a JSON array; calls inside calls) or 11 (thirty-sixth
session: a line with an emoji before the cursor, Markdown, a Makefile, a Dockerfile, tabs, no
final newline, trailing spaces, after Enter inside a call, ``elif``, a method chain, CJK, a
``.gitignore``) or 12 (a GitHub workflow, SQL, a shell ``if``, ``pyproject.toml``, ``match``,
the ``__main__`` guard, ``pytest.raises``, an ``except`` body, a regex, a comprehension on
lines, TSX, a Go handler) or 13 (empty bodies in brace and ``end`` languages, the closer
below: JavaScript, Go, C, Ruby, Lua, Java, Rust, TypeScript) or 14 (code on both sides: a
line's start, before a trailing comment, a dict key, a new method between two, a comment
above a function, JS ``else {|}``, a backslash continuation, a call's argument lines, a Go
statement between two, JSX in a ``map``) or 15 (inside blocks whose closer is below: a Ruby
``do`` block, a shell ``case``, Elixir, a Python loop, a JS ``switch``, a Rust ``impl``, a TS
``try``, a C ``while``) or 16 (thirty-seventh session: code that repeats itself: rows of
zeros, asserts, an enum, a dict, nested ``#ifdef``, a comment rule, a replace chain, HTML rows,
``add_argument`` lines, a banner, SQL rows, a C byte table) or 17 (thirty-eighth session:
pytest's ``parametrize`` rows, Go's ``if err != nil``, a TS import list, after a comment, a
Rust ``Display``, Java ``toString``, a ``@property``, JS ``reduce``, a dict comprehension, a
shell loop, an f-string's message, a C ``case``, an HTML list item, after ``try``'s body) or
18 (Python places typed every day: ``enumerate(|)``, ``__repr__``, keyword values, ``sorted``'s
key, ``async with``, a dataclass field, an f-string's ``{|}``, a return annotation, after
``np.``, an early exit, a generator, a method between two) or 19 (other languages every day: a
TS ``fetch``, JS ``filter(|)``, a TS interface, an Express handler, Go struct fields and
loops, Rust ``Option`` and iterators, Java and C# bodies, a TSX return, ``new Promise(|)``,
a Go map, a TS class's next method) or 20 (thirty-ninth session: ``requirements.txt``,
``package.json``, a Kubernetes manifest, Jest and unittest asserts, pandas, Rust and Go tests, a C
include guard, an ``__init__``'s assignments, a class docstring, a comment's words, an HTML
``head``, Kotlin) or 21 (a docstring between auto-closed triple quotes: a class, functions and
methods, a dataclass, a module) or 22 (doc comments: JSDoc, TSDoc, Rust ``///``, Go, Javadoc, a Python
comment above a loop, ``/** | */``) or 23 (documentation templates: VS Code's JSDoc with ``@param`` lines,
autoDocstring's ``Args:`` / ``Returns:``) or 24 (``/** | */`` as an editor leaves it: JavaScript,
TypeScript, Java, C) or 25 (``super().__init__(|)``, ``finally``, a fetch error, SQL placeholders,
a shell function, ``RUN``, a workflow step, a comprehension's filter, ``os.environ.get(|)``, Go, a
retry loop, CSS, a Rust word count) or 26 (fortieth session: a triple quote in a comment, a ``'''``
docstring or a one-line string above the cursor, code below a multi-line docstring; Kotlin's ``//``) or 27 (after a ``return``, a Flask route, relative
imports, an HTML closing tag, Vue, Lua, SQL, a Markdown list, ``except ... as e``, ``__post_init__``, C#, a
format spec, the ``__main__`` guard, a sort key) or 28 (an attribute, a property, ``map(|)``, a TS interface, ``with
open``, a loop over items, a Go method, Rust's ``Default``, a test's next assert, a shell loop, a logger, an
argument, after ``break`` and after a bare ``raise``) or 29 (around exits: C and Go switch cases, a ``match`` arm, a
Ruby modifier, a JS function after ``return``, early returns, ``continue``, Kotlin, a shell ``case``, ``throw``, ``elif``, Rust) or 30 (``__eq__``, a None check, a JS ``try``, ``useEffect``, a signature,
a generator, an ORM column, a pytest fixture, loops in Go, C and Java, ``join``, a Rust ``match``, a JSON array) or 31 (inside a line, code right of the cursor: an f-string, a condition, a
parameter list, a returned dict, an assert, ``range(|)``, ``open(|)``, a comprehension, a logging call, a TS type
argument, format calls in Go, C and Rust) or 32 (triple quotes in other languages: Julia and Elixir docs,
Kotlin, Swift and Scala strings, TOML; Python strings holding quotes) or 33 (web frameworks and data: FastAPI,
Django, Express middleware, a React component, a Next.js route, a Go handler, Rust's ``?``, pandas,
matplotlib, a Makefile target, ``find -exec``) or 34 (inserting between existing code: an import, a dict
entry, a test, an ``else``, a method, a match arm, a CSS rule, a TS statement, a Go import, a route) or 35
(forty-first session: below ``return (`` ... ``)`` and ``return {`` ... ``};``, below a call and a callback
closed on their own line, ``with open``, ``basicConfig(|)``, ``add_argument``, ``useState(|)``, Rust's
``Display``, Go's ``defer``, ``CREATE TABLE``, ``set -euo pipefail``, a type argument, the ``__main__`` guard).
Settings beyond those below
from ``USER_FLOWS_OPTIONS`` (JSON). Each line:
the file, the text around the cursor (``|``), what the editor would show.
"""
import json
import os
import sys
import tempfile
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

BATCH = int(sys.argv[1]) if len(sys.argv) > 1 else 1

# a fixed folder name: a short document's prompt holds it (``fileHeader``), so runs compare
ws = Path(tempfile.mkdtemp(prefix="fastcoder-user-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws / "server.log")
# more settings from the environment, e.g. USER_FLOWS_OPTIONS='{"midLineBlocks": false}'
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False, "earlyAnswerMs": None,
                   **json.loads(os.environ.get("USER_FLOWS_OPTIONS", "{}"))})
cl.wait_status("ready", 300)

MODULE = '''import json
from collections import Or|

class Inventory:
    """Items and their counts."""

    def __init__(self):
        self.items = {}

    def add(self, name: str, count: int = 1) -> None:
        if count <= 0:
            raise ValueError("cou|")
        self.items[name] = self.items.get(name, 0) + count
'''
BATCH_1 = [
    ("imports.py", "python", MODULE),
    ("fstring.py", "python", 'def greet(name):\n    print(f"Hello, {na|}")\n'),
    ("decorator.py", "python", "import pytest\n\n\n@pytest.mark.para|\ndef test_add(a, b, expected):\n    assert a + b == expected\n"),
    ("comment.py", "python", "def mean(values):\n    # return the arithmetic mean of |\n"),
    ("dict.py", "python", 'DEFAULTS = {\n    "host": "localhost",\n    "port": 8080,\n    |\n}\n'),
    ("method.py", "python", "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n        self._items.append(item)\n\n    def pop(self):\n        |\n"),
    ("newfunc.py", "python", "import os\n\n\ndef |\n"),
    ("arrow.js", "javascript", "const numbers = [1, 2, 3];\nconst doubled = numbers.map((n) => |);\n"),
    ("loop.go", "go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\t|\n\t}\n}\n"),
    ("docstring.py", "python", 'def clamp(x, lo, hi):\n    """Return x limited to |\n'),
    ("call.py", "python", "import subprocess\n\nresult = subprocess.run([\"ls\", \"-l\"], capture_output=True, te|)\n"),
    ("crlf.py", "python", "def square(x):\r\n    return x * |\r\n"),
]
INVENTORY = '''class Inventory:
    """Items and their counts."""

    def __init__(self):
        self.items = {}

    def add(self, name: str, count: int = 1) -> None:
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name: str) -> None:
        if name in self.it|

    def total(self) -> int:
        return sum(self.items.values())
'''
BATCH_2 = [
    ("inventory.py", "python", INVENTORY),
    ("middle.py", "python", "def parse(line):\n    key, _, value = line.partition(\"=\")\n    |\n    return key.strip(), value.strip()\n\n\ndef main():\n    pass\n"),
    ("comment_call.py", "python", "import logging\n\nlog = logging.getLogger(__name__)\nlog.info(|)  # startup\n"),
    ("iface.ts", "typescript", "interface User {\n  id: number;\n  name: string;\n  |\n}\n"),
    ("vec.rs", "rust", "fn main() {\n    let v: Vec<i32> = |;\n    println!(\"{:?}\", v);\n}\n"),
    ("ifblock.py", "python", "def sign(x):\n    if x > 0:\n        |\n"),
    ("kwargs.py", "python", "import requests\n\nresp = requests.get(url, time|)\n"),
    ("listcomp.py", "python", "words = [\"a\", \"bb\", \"ccc\"]\nlengths = [len(w) for w in |]\n"),
    ("tabs.go", "go", "package main\n\nfunc add(a int, b int) int {\n\t|\n}\n"),
    ("emptyline.py", "python", "import sys\n\n\ndef main(argv):\n    \"\"\"Print the arguments, one per line.\"\"\"\n|\n"),
]
BATCH_3 = [
    ("ts_call.ts", "typescript", "function greet(name: string): string {\n  return `Hello, ${na|}`;\n}\n"),
    ("ts_import.ts", "typescript", "import { readFile } from \"fs/prom|\";\n"),
    ("py_dict_get.py", "python", "def port(config):\n    return int(config.get(\"po|\", 8080))\n"),
    ("py_index.py", "python", "def first(items):\n    return items[|]\n"),
    ("py_with.py", "python", "def read(path):\n    with open(path, encoding=\"ut|\") as fh:\n        return fh.read()\n"),
    ("go_err.go", "go", "package main\n\nimport \"os\"\n\nfunc main() {\n\tf, err := os.Open(\"x\")\n\tif err != nil {\n\t\t|\n\t}\n\tdefer f.Close()\n}\n"),
    ("rs_match.rs", "rust", "fn describe(n: i32) -> &'static str {\n    match n {\n        0 => \"zero\",\n        |\n    }\n}\n"),
    ("py_lambda.py", "python", "pairs = [(1, \"b\"), (2, \"a\")]\npairs.sort(key=lambda p: |)\n"),
    ("py_return_mid.py", "python", "def area(w, h):\n    return w * |h\n"),
    ("py_class_attr.py", "python", "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.|\n"),
]
BATCH_4 = [
    ("between.py", "python", "def load(path):\n    with open(path) as fh:\n        return fh.read()\n\n\n|\n\n\ndef save(path, text):\n    with open(path, \"w\") as fh:\n        fh.write(text)\n"),
    ("below.py", "python", "def total(prices, tax):\n    subtotal = sum(prices)\n    |\n    return subtotal + tax_amount\n"),
    ("else.py", "python", "def sign(x):\n    if x >= 0:\n        return 1\n    else:\n        |\n"),
    ("multiline_call.py", "python", "result = compute(\n    alpha=1,\n    |\n)\n"),
    ("test_fn.py", "python", "from calc import add\n\n\ndef test_add_negative_numbers():\n    |\n"),
    ("try.py", "python", "import json\n\n\ndef parse(text):\n    try:\n        return json.loads(text)\n    |\n"),
    ("obj.js", "javascript", "const config = {\n  host: \"localhost\",\n  |\n};\nmodule.exports = config;\n"),
    ("args.py", "python", "def scale(values, factor):\n    \"\"\"Multiply every value by factor.\n\n    Args:\n        |\n    \"\"\"\n    return [v * factor for v in values]\n"),
    ("todo.py", "python", "def fetch(url):\n    # TODO: retry on timeouts\n    |\n"),
    ("return_mid.py", "python", "def clean(rows):\n    out = []\n    for row in rows:\n        if not row:\n            |\n        out.append(row.strip())\n    return out\n"),
]
BATCH_5 = [
    ("main.c", "c", "#include <stdio.h>\n\nint main(void) {\n    for (int i = 0; i < 3; i++) {\n        printf(|);\n    }\n    return 0;\n}\n"),
    ("App.java", "java", "public class App {\n    public static void main(String[] args) {\n        System.out.|\n    }\n}\n"),
    ("init.lua", "lua", "local M = {}\n\nfunction M.setup(opts)\n  opts = opts or {}\n  |\nend\n\nreturn M\n"),
    ("build.sh", "shellscript", "#!/bin/bash\nset -euo pipefail\n\nfor f in *.txt; do\n  |\ndone\n"),
    ("greet.rb", "ruby", "def greet(name)\n  |\nend\n"),
    ("index.php", "php", "<?php\n\nfunction add($a, $b) {\n    |\n}\n"),
    ("Main.kt", "kotlin", "fun main() {\n    val names = listOf(\"a\", \"b\")\n    names.forEach { |}\n}\n"),
    ("util.cpp", "cpp", "#include <vector>\n\nint sum(const std::vector<int>& v) {\n    int total = 0;\n    for (int x : v) |\n    return total;\n}\n"),
    ("Program.cs", "csharp", "using System;\n\nclass Program {\n    static void Main() {\n        Console.Wri|\n    }\n}\n"),
    ("lib.swift", "swift", "func square(_ x: Int) -> Int {\n    |\n}\n"),
]
BATCH_6 = [  # thirty-second session: type hints, data formats, markup, async, a closing f-string
    ("hints.py", "python", "def read_config(path: str) -> dict[str, |]:\n    pass\n"),
    ("point.py", "python", "from dataclasses import dataclass\n\n\n@dataclass\nclass Point:\n    x: float\n    |\n"),
    ("query.py", "python", "def names(cur, min_age):\n    cur.execute(\"SELECT name FROM users WHERE |\")\n    return cur.fetchall()\n"),
    ("list.html", "html", "<ul>\n  <li>One</li>\n  <li>Two</li>\n  |\n</ul>\n"),
    ("button.css", "css", ".button {\n  color: white;\n  |\n}\n"),
    ("compose.yaml", "yaml", "services:\n  web:\n    image: nginx\n    |\n"),
    ("package.json", "json", "{\n  \"name\": \"app\",\n  \"version\": \"1.0.0\",\n  |\n}\n"),
    ("fetch.py", "python", "async def fetch(session, url):\n    async with session.get(url) as resp:\n        |\n"),
    ("repr.py", "python", "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n    def __repr__(self):\n        return f\"Point({|})\"\n"),
    ("typing_import.py", "python", "from typing import |\n\n\ndef first(items: Sequence[T]) -> Optional[T]:\n    return items[0] if items else None\n"),
]
CLIENT = '''class Client:
    def get(self, url, params=None, headers=None, timeout=None):
        return self.request(
            "GET",
            url,
            params=params,
            headers=headers,
            timeout=timeout,
        )

    def post(self, url, data=None, headers=None, timeout=None):
        return self.request(|)
'''
ARGS = '''import argparse


def build_parser():
    parser = argparse.ArgumentParser(description="Copy files.")
    parser.add_argument(
        "source",
        help="the file to copy",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite the target",
    )
    parser.add_argument(|)
    return parser
'''
BATCH_7 = [
    ("client.py", "python", CLIENT),
    ("args.py", "python", ARGS),
    ("setup.py", "python", "from setuptools import setup\n\nsetup(|)\n"),
    ("run.py", "python", "import subprocess\n\n\ndef build(target):\n    subprocess.run(|)\n"),
    ("api.js", "javascript", "async function save(user) {\n  const res = await fetch(\"/api/users\", {|});\n  return res.json();\n}\n"),
    ("dict.py", "python", "def defaults():\n    return {|}\n"),
]
BATCH_8 = [
    ("items.py", "python", "COLORS = [\n    \"red\",\n    \"green\",\n]\n\nSIZES = [|]\n"),
    ("config.go", "go", "package main\n\ntype Config struct {\n\tHost string\n\tPort int\n}\n\nfunc defaults() Config {\n\treturn Config{|}\n}\n"),
    ("main.rs", "rust", "fn main() {\n    let names = vec![|];\n    println!(\"{:?}\", names);\n}\n"),
    ("opts.js", "javascript", "const server = http.createServer(handler);\nconst options = {|};\nserver.listen(options);\n"),
    ("user.py", "python", "class UserService:\n    def create_user(|):\n        pass\n"),
    ("sort.py", "python", "def top(scores):\n    ranked = sorted(|)\n    return ranked[:3]\n"),
    ("log.ts", "typescript", "function report(err: Error) {\n  console.error(|);\n}\n"),
    ("hello.py", "python", "def main():\n    name = input()\n    print(|)\n"),
    ("package.json", "json", "{\n  \"name\": \"app\",\n  \"dependencies\": {|}\n}\n"),
    ("check.c", "c", "int check(int x) {\n    if (|) {\n        return 1;\n    }\n    return 0;\n}\n"),
]
BATCH_9 = [
    ("insert_arg.py", "python", "def area(w, h):\n    return w * h\n\n\nprint(area(3, |))\n"),
    ("before_arg.py", "python", "import os\n\npath = os.path.join(|, \"data.txt\")\n"),
    ("method_chain.js", "javascript", "const names = users\n  .filter((u) => u.active)\n  .|\n"),
    ("kwargs.py", "python", "import requests\n\nresp = requests.get(url, |timeout=5)\n"),
    ("ternary.py", "python", "def sign(x):\n    return 1 if x > 0 else |\n"),
    ("comment_end.py", "python", "def total(xs):\n    s = 0  # running |\n    for x in xs:\n        s += x\n    return s\n"),
    ("empty_call.py", "python", "import time\n\nstart = time.time(|)\n"),
    ("index.py", "python", "def last(xs):\n    return xs[|]\n"),
    ("nested.py", "python", "data = {\"users\": [{\"name\": \"a\"}]}\nfirst = data[\"users\"][0][|]\n"),
    ("lambda.py", "python", "pairs = [(1, 'b'), (2, 'a')]\npairs.sort(key=lambda p: |)\n"),
]
BATCH_10 = [
    ("tmpl.js", "javascript", "function greet(user) {\n  return `Hello, ${|}`;\n}\n"),
    ("if.go", "go", "package main\n\nfunc abs(x int) int {\n\tif x < 0 {|}\n\treturn x\n}\n"),
    ("arrow.ts", "typescript", "export const handler = async (event: Event) => {|};\n"),
    ("match.rs", "rust", "fn name(n: u8) -> &'static str {\n    match n {|}\n}\n"),
    ("call_in_arg.py", "python", "import os\n\nfiles = sorted(os.listdir(|))\n"),
    ("dict_get.py", "python", "def port(cfg):\n    return int(cfg.get(|, 8080))\n"),
    ("class_body.java", "java", "public class Point {|}\n"),
    ("fmt.py", "python", "def show(name, n):\n    print(\"{}: {}\".format(|))\n"),
    ("json_arr.json", "json", "{\n  \"files\": [|]\n}\n"),
    ("nested_call.py", "python", "import json\n\n\ndef save(data, path):\n    with open(path, \"w\") as f:\n        json.dump(|)\n"),
]
BATCH_11 = [  # thirty-sixth session: other files and encodings
    ("emoji.py", "python", "GREETING = \"héllo 😀 wörld\"; n = len(GREE|)\n"),
    ("README.md", "markdown", "# inventory\n\nA small library to count items.\n\n## Install\n\n|\n"),
    ("Makefile", "makefile", "CC = gcc\nCFLAGS = -O2 -Wall\n\nall: main\n\nmain: main.o util.o\n\t|\n"),
    ("Dockerfile", "dockerfile", "FROM python:3.12-slim\nWORKDIR /app\nCOPY requirements.txt .\n|\n"),
    ("tabs.py", "python", "def total(xs):\n\ts = 0\n\tfor x in xs:\n\t\t|\n\treturn s\n"),
    ("noeol.py", "python", "def double(x):\n    return |"),
    ("trailing_ws.py", "python", "def half(x):\n    |    \n"),
    ("after_enter.py", "python", "import logging\n\nlog = logging.getLogger(__name__)\nlog.info(\n    |\n)\n"),
    ("elif.py", "python", "def grade(score):\n    if score >= 90:\n        return \"A\"\n    elif |\n"),
    ("chain.py", "python", "import pandas as pd\n\ndf = pd.read_csv(\"data.csv\")\nout = (\n    df.groupby(\"city\")\n    .|\n)\n"),
    ("cjk.py", "python", "# 计算平均值\ndef mean(values):\n    return sum(values) / |\n"),
    ("gitignore", "ignore", "__pycache__/\n*.pyc\n.venv/\n|\n"),
]
BATCH_12 = [  # thirty-sixth session: more places in real files
    ("ci.yml", "yaml", "name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      |\n"),
    ("schema.sql", "sql", "CREATE TABLE users (\n    id INTEGER PRIMARY KEY,\n    |\n);\n"),
    ("check.sh", "shellscript", "#!/bin/sh\nif [ -z \"$1\" ]; then\n  |\nfi\n"),
    ("pyproject.toml", "toml", "[project]\nname = \"inventory\"\nversion = \"0.1.0\"\n|\n"),
    ("match.py", "python", "def kind(cmd):\n    match cmd.split():\n        case [\"go\", direction]:\n            return direction\n        |\n"),
    ("main_guard.py", "python", "import sys\n\n\ndef main(argv):\n    return 0\n\n\nif __name__ == |\n"),
    ("raises.py", "python", "import pytest\n\nfrom calc import divide\n\n\ndef test_divide_by_zero():\n    with pytest.raises(|):\n        divide(1, 0)\n"),
    ("except.py", "python", "import json\n\n\ndef load(text):\n    try:\n        return json.loads(text)\n    except json.JSONDecodeError as e:\n        |\n"),
    ("regex.py", "python", "import re\n\nEMAIL = re.compile(r\"|\")\n"),
    ("multi_comp.py", "python", "def pairs(xs, ys):\n    return [\n        (x, y)\n        for x in xs\n        |\n    ]\n"),
    ("component.tsx", "typescriptreact", "export function Greeting({ name }: { name: string }) {\n  return <h1>|</h1>;\n}\n"),
    ("handler.go", "go", "package main\n\nimport \"net/http\"\n\nfunc health(w http.ResponseWriter, r *http.Request) {\n\t|\n}\n"),
]
BATCH_13 = [  # thirty-sixth session: bodies whose lines close inner blocks, the closer below
    ("sum.js", "javascript", "function sum(xs) {\n  |\n}\n"),
    ("evens.go", "go", "package main\n\nfunc evens(xs []int) []int {\n\t|\n}\n"),
    ("clamp.c", "c", "int clamp(int x, int lo, int hi) {\n    |\n}\n"),
    ("count.rb", "ruby", "def count_words(text)\n  |\nend\n"),
    ("max.lua", "lua", "local function max(t)\n  |\nend\n"),
    ("Fib.java", "java", "public class Fib {\n    static int fib(int n) {\n        |\n    }\n}\n"),
    ("filter.rs", "rust", "fn positives(v: &[i32]) -> Vec<i32> {\n    |\n}\n"),
    ("retry.ts", "typescript", "async function retry<T>(fn: () => Promise<T>, times: number): Promise<T> {\n  |\n}\n"),
]
BATCH_14 = [  # thirty-sixth session: code on both sides
    ("line_start.py", "python", "def f(x):\n    y = x * 2\n|    return y\n"),
    ("trailing_comment.py", "python", "def count(items):\n    n = |  # the number of non-empty items\n    return n\n"),
    ("dict_key.py", "python", "def port(cfg):\n    return cfg[\"|\"]\n"),
    ("new_method.py", "python", "class Store:\n    def __init__(self, path):\n        self.path = path\n\n    |\n\n    def save(self, data):\n        with open(self.path, \"w\") as fh:\n            fh.write(data)\n"),
    ("comment_above.py", "python", "# |\ndef median(values):\n    s = sorted(values)\n    n = len(s)\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n"),
    ("else_brace.js", "javascript", "function sign(x) {\n  if (x >= 0) {\n    return 1;\n  } else {|}\n}\n"),
    ("continuation.py", "python", "total = price * quantity \\\n    |\n"),
    ("kwarg_lines.py", "python", "import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument(\n    \"--verbose\",\n    |\n)\n"),
    ("between_stmts.go", "go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tname := \"world\"\n\t|\n\tfmt.Println(greeting)\n}\n"),
    ("jsx_map.jsx", "javascriptreact", "export function List({ items }) {\n  return (\n    <ul>\n      {items.map((item) => (\n        |\n      ))}\n    </ul>\n  );\n}\n"),
]
BATCH_15 = [  # thirty-sixth session: more block closers below the cursor
    ("each.rb", "ruby", "def countdown(n)\n  n.downto(1).each do\n    |\n  end\n  puts \"liftoff\"\nend\n"),  # (| marks the cursor)
    ("case.sh", "shellscript", "#!/bin/bash\ncase \"$1\" in\n  start)\n    |\n    ;;\nesac\n"),
    ("mod.ex", "elixir", "defmodule Math do\n  def sum(list) do\n    |\n  end\nend\n"),
    ("loop.py", "python", "def scan(lines):\n    for line in lines:\n        if not line:\n            continue\n        |\n    return None\n"),
    ("switch.js", "javascript", "function label(n) {\n  switch (n) {\n    case 0:\n      |\n  }\n}\n"),
    ("impl.rs", "rust", "struct Counter { n: u32 }\n\nimpl Counter {\n    |\n}\n"),
    ("try.ts", "typescript", "async function load(path: string) {\n  try {\n    |\n  } catch (err) {\n    console.error(err);\n  }\n}\n"),
    ("while.c", "c", "int count(const char *s) {\n    int n = 0;\n    while (*s) {\n        |\n    }\n    return n;\n}\n"),
]
BATCH_16 = [  # thirty-seventh session: code that repeats itself, where greedy decoding may loop
    ("grid.py", "python", "GRID = [\n    [0, 0, 0, 0],\n    [0, 0, 0, 0],\n    |\n]\n"),
    ("test_add.py", "python", "from calc import add\n\n\ndef test_add():\n    assert add(1, 1) == 2\n    assert add(2, 2) == 4\n    |\n"),
    ("color.py", "python", "from enum import Enum\n\n\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\n    |\n"),
    ("roman.py", "python", "ROMAN = {\n    1: 'I',\n    4: 'IV',\n    5: 'V',\n    |\n}\n"),
    ("nested.h", "c", "#ifdef A\n#ifdef B\n#ifdef C\nint x;\n|\n"),
    ("rule.py", "python", "import os\n\n# ------------------------------------------------------------------\n# |\n"),
    ("clean.py", "python", "def clean(s):\n    s = s.replace('-', ' ')\n    s = s.replace('_', ' ')\n    |\n"),
    ("rows.html", "html", "<table>\n  <tr><td>1</td></tr>\n  <tr><td>2</td></tr>\n  |\n</table>\n"),
    ("cli.py", "python", "import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--host')\nparser.add_argument('--port')\n|\n"),
    ("banner.py", "python", "def report(rows):\n    print('=' * 40)\n    print('Report')\n    print('=' * 40)\n    |\n"),
    ("seed.sql", "sql", "INSERT INTO users (id, name) VALUES\n  (1, 'alice'),\n  (2, 'bob'),\n  |\n"),
    ("zeros.c", "c", "static const unsigned char table[16] = {\n    0x00, 0x00, 0x00, 0x00, |\n};\n"),
]
BATCH_17 = [  # thirty-eighth session: everyday places not tried yet
    ("test_param.py", "python", "import pytest\n\n\n@pytest.mark.parametrize(\"a,b,expected\", [\n    (1, 2, 3),\n    |\n])\ndef test_add(a, b, expected):\n    assert a + b == expected\n"),
    ("err.go", "go", "package main\n\nimport \"os\"\n\nfunc read(path string) ([]byte, error) {\n\tdata, err := os.ReadFile(path)\n\tif err != nil {\n\t\t|\n\t}\n\treturn data, nil\n}\n"),
    ("hooks.ts", "typescript", "import { useState, | } from \"react\";\n\nexport function Counter() {\n  const [n, setN] = useState(0);\n  useEffect(() => { document.title = String(n); }, [n]);\n  return n;\n}\n"),
    ("prices.py", "python", "def top(items):\n    # sort the items by price, highest first\n    |\n"),
    ("point.rs", "rust", "use std::fmt;\n\nstruct Point { x: i32, y: i32 }\n\nimpl fmt::Display for Point {\n    |\n}\n"),
    ("Person.java", "java", "public class Person {\n    private final String name;\n\n    @Override\n    public String toString() {\n        |\n    }\n}\n"),
    ("prop.py", "python", "class User:\n    def __init__(self, first, last):\n        self.first = first\n        self.last = last\n\n    @property\n    def full_name(self):\n        |\n"),
    ("reduce.js", "javascript", "const items = [{ price: 2 }, { price: 3 }];\nconst total = items.reduce((acc, item) => |, 0);\n"),
    ("dictcomp.py", "python", "def invert(d):\n    return {|: k for k, v in d.items()}\n"),
    ("loop.sh", "shellscript", "#!/bin/sh\nfor f in *.txt; do\n  |\ndone\n"),
    ("fmsg.py", "python", "def check(age):\n    if age < 0:\n        raise ValueError(f\"|\")\n    return age\n"),
    ("switch.c", "c", "int score(char c) {\n    switch (c) {\n    case 'a':\n        |\n    }\n    return 0;\n}\n"),
    ("list.html", "html", "<ul>\n  <li>Home</li>\n  <li>|</li>\n</ul>\n"),
    ("try.py", "python", "def parse(s):\n    try:\n        return int(s)\n    |\n"),
]
BATCH_18 = [  # thirty-eighth session: Python places a user types every day
    ("enum.py", "python", "def show(xs):\n    for i, x in enumerate(|):\n        print(i, x)\n"),
    ("repr.py", "python", "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n    def __repr__(self):\n        |\n"),
    ("log.py", "python", "import logging\n\nlogging.basicConfig(level=|)\nlog = logging.getLogger(__name__)\n"),
    ("enc.py", "python", "def read(path):\n    with open(path, \"r\", encoding=|) as f:\n        return f.read()\n"),
    ("sortkey.py", "python", "def by_age(people):\n    return sorted(people, key=|)\n"),
    ("fetch.py", "python", "import aiohttp\n\n\nasync def fetch(session, url):\n    async with session.get(url) as resp:\n        |\n"),
    ("dc.py", "python", "from dataclasses import dataclass\n\n\n@dataclass\nclass Point:\n    x: float\n    |\n"),
    ("fdebug.py", "python", "def debug(name, value):\n    print(f\"{name=}, {|}\")\n"),
    ("hint.py", "python", "import json\n\n\ndef load(path: str) -> |:\n    with open(path) as f:\n        return json.load(f)\n"),
    ("np.py", "python", "import numpy as np\n\narr = np.|\n"),
    ("main_args.py", "python", "import sys\n\n\ndef main(argv):\n    if len(argv) < 2:\n        |\n    print(argv[1])\n"),
    ("gen.py", "python", "def chunks(xs, n):\n    for i in range(0, len(xs), n):\n        |\n"),
    ("kw.py", "python", "import requests\n\nresp = requests.get(url, timeout=|)\n"),
    ("classvar.py", "python", "class Cache:\n    def __init__(self):\n        self._data = {}\n\n    def get(self, key, default=None):\n        |\n\n    def set(self, key, value):\n        self._data[key] = value\n"),
]
BATCH_19 = [  # thirty-eighth session: everyday places in other languages
    ("fetch.ts", "typescript", "export async function getUser(id: string): Promise<User> {\n  const res = await fetch(`/api/users/${id}`);\n  |\n}\n"),
    ("arr.js", "javascript", "const users = [{ name: 'a', age: 3 }, { name: 'b', age: 5 }];\nconst adults = users.filter(|);\n"),
    ("iface.ts", "typescript", "interface User {\n  id: string;\n  name: string;\n  |\n}\n"),
    ("express.js", "javascript", "const express = require('express');\nconst app = express();\n\napp.get('/health', (req, res) => {\n  |\n});\n"),
    ("struct.go", "go", "package main\n\ntype Config struct {\n\tHost string\n\tPort int\n\t|\n}\n"),
    ("loop.go", "go", "package main\n\nfunc sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {\n\t\t|\n\t}\n\treturn total\n}\n"),
    ("opt.rs", "rust", "fn first_word(s: &str) -> Option<&str> {\n    |\n}\n"),
    ("vec.rs", "rust", "fn main() {\n    let v = vec![1, 2, 3];\n    let doubled: Vec<i32> = v.iter().|;\n}\n"),
    ("Main.java", "java", "import java.util.List;\n\npublic class Main {\n    public static int sum(List<Integer> xs) {\n        int total = 0;\n        |\n    }\n}\n"),
    ("Prog.cs", "csharp", "using System;\n\nclass Program\n{\n    static void Main(string[] args)\n    {\n        |\n    }\n}\n"),
    ("comp.tsx", "typescriptreact", "type Props = { title: string };\n\nexport function Header({ title }: Props) {\n  return |;\n}\n"),
    ("promise.js", "javascript", "function sleep(ms) {\n  return new Promise(|);\n}\n"),
    ("map.go", "go", "package main\n\nfunc count(words []string) map[string]int {\n\tcounts := make(map[string]int)\n\t|\n}\n"),
    ("class.ts", "typescript", "export class Stack<T> {\n  private items: T[] = [];\n\n  push(item: T): void {\n    this.items.push(item);\n  }\n\n  |\n}\n"),
]
BATCH_20 = [  # thirty-ninth session: tests, configuration files, headers and prose
    ("requirements.txt", "pip-requirements", "requests==2.31.0\nnumpy==1.26.4\n|\n"),
    ("package.json", "json", "{\n  \"name\": \"app\",\n  \"dependencies\": {\n    \"express\": \"^4.18.2\",\n    |\n  }\n}\n"),
    ("deploy.yaml", "yaml", "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: |\n"),
    ("add.test.js", "javascript", "const add = require('./add');\n\ntest('adds 1 + 2 to equal 3', () => {\n  expect(add(1, 2)).|;\n});\n"),
    ("test_calc.py", "python", "import unittest\n\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_small(self):\n        self.|\n"),
    ("frame.py", "python", "import pandas as pd\n\ndf = pd.read_csv(\"people.csv\")\nadults = df[df[\"age\"] >= 18]\nby_city = adults.groupby(|)\n"),
    ("lib.rs", "rust", "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        |\n    }\n}\n"),
    ("add_test.go", "go", "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\t|\n}\n"),
    ("util.h", "c", "#ifndef UTIL_H\n#define UTIL_H\n\n|\n\n#endif\n"),
    ("server.py", "python", "class Server:\n    def __init__(self, host, port, timeout):\n        |\n"),
    ("doc.py", "python", "class RateLimiter:\n    \"\"\"|\"\"\"\n\n    def __init__(self, rate: float, burst: int):\n        self.rate = rate\n        self.burst = burst\n"),
    ("comment.py", "python", "def mean(xs):\n    # Compute the |\n    return sum(xs) / len(xs)\n"),
    ("index.html", "html", "<!DOCTYPE html>\n<html>\n<head>\n  <meta charset=\"utf-8\">\n  |\n</head>\n<body></body>\n</html>\n"),
    ("User.kt", "kotlin", "data class User(val id: Int, val name: String)\n\nfun main() {\n    val users = listOf(User(1, \"a\"), User(2, \"b\"))\n    |\n}\n"),
]
BATCH_21 = [  # thirty-ninth session: a docstring between auto-closed triple quotes, in short files
    ('s1.py', 'python', 'class RateLimiter:\n    """|"""\n\n    def __init__(self, rate: float, burst: int):\n        self.rate = rate\n        self.burst = burst\n'),
    ('s2.py', 'python', 'import os\n\n\ndef read_config(path: str, default: Optional[dict] = None) -> dict:\n    """|"""\n    if not os.path.exists(path):\n        return default or {}\n    with open(path) as f:\n        return json.load(f)\n'),
    ('s3.py', 'python', 'class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        """|"""\n        self.items.append(item)\n'),
    ('s4.py', 'python', 'def parse_duration(text: str) -> int:\n    """|"""\n    total = 0\n    for part in text.split():\n        total += int(part[:-1]) * {\'h\': 3600, \'m\': 60, \'s\': 1}[part[-1]]\n    return total\n'),
    ('s5.py', 'python', 'import hashlib\n\n\ndef file_digest(path, chunk=65536):\n    """|"""\n    h = hashlib.sha256()\n    with open(path, \'rb\') as f:\n        for block in iter(lambda: f.read(chunk), b\'\'):\n            h.update(block)\n    return h.hexdigest()\n'),
    ('s6.py', 'python', 'from dataclasses import dataclass\n\n\n@dataclass\nclass Point:\n    """|"""\n\n    x: float\n    y: float\n'),
    ('s7.py', 'python', 'def is_palindrome(s: str) -> bool:\n    """|"""\n    s = \'\'.join(c.lower() for c in s if c.isalnum())\n    return s == s[::-1]\n'),
    ('s8.py', 'python', 'class Cache:\n    def __init__(self, size):\n        self.size = size\n        self.data = {}\n\n    def get(self, key, default=None):\n        """|"""\n        return self.data.get(key, default)\n'),
    ('s9.py', 'python', '"""|"""\nimport sys\n\n\ndef main(argv):\n    print(argv)\n'),
    ('s10.py', 'python', 'async def fetch_all(session, urls):\n    """|"""\n    return await asyncio.gather(*(session.get(u) for u in urls))\n'),
]
BATCH_22 = [  # thirty-ninth session: doc comments and a comment above code
    ('jsdoc.js', 'javascript', '/**\n * |\n */\nfunction add(a, b) {\n  return a + b;\n}\n'),
    ('tsdoc.ts', 'typescript', 'export class Cache<T> {\n  private items = new Map<string, T>();\n\n  /**\n   * |\n   */\n  get(key: string): T | undefined {\n    return this.items.get(key);\n  }\n}\n'),
    ('doc.rs', 'rust', '/// |\npub fn parse_port(s: &str) -> Option<u16> {\n    s.parse().ok()\n}\n'),
    ('doc.go', 'go', 'package main\n\n// |\nfunc Reverse(s string) string {\n\tr := []rune(s)\n\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {\n\t\tr[i], r[j] = r[j], r[i]\n\t}\n\treturn string(r)\n}\n'),
    ('Doc.java', 'java', 'public class MathUtil {\n    /**\n     * |\n     */\n    public static int clamp(int x, int lo, int hi) {\n        return Math.max(lo, Math.min(hi, x));\n    }\n}\n'),
    ('cmt.py', 'python', 'def retry(fn, attempts=3):\n    # |\n    for i in range(attempts):\n        try:\n            return fn()\n        except Exception:\n            if i == attempts - 1:\n                raise\n'),
    ('jsdoc2.js', 'javascript', '/** | */\nfunction add(a, b) {\n  return a + b;\n}\n'),
]
BATCH_23 = [  # thirty-ninth session: documentation templates (VS Code's JSDoc, autoDocstring's)
    ('jsdoc3.js', 'javascript', '/**\n * |\n * @param a \n * @param b \n * @returns \n */\nfunction add(a, b) {\n  return a + b;\n}\n'),
    ('jsdoc4.ts', 'typescript', '/**\n * |\n * @param items \n * @param key \n * @returns \n */\nexport function groupBy<T>(items: T[], key: (t: T) => string): Record<string, T[]> {\n  const out: Record<string, T[]> = {};\n  for (const it of items) {\n    (out[key(it)] ??= []).push(it);\n  }\n  return out;\n}\n'),
    ('jsdoc5.js', 'javascript', '/**\n * Adds two numbers.\n * @param a |\n * @param b \n * @returns \n */\nfunction add(a, b) {\n  return a + b;\n}\n'),
    ('pydoc.py', 'python', 'def add(a, b):\n    """\n    |\n\n    Args:\n        a (int): \n        b (int): \n\n    Returns:\n        int: \n    """\n    return a + b\n'),
]
BATCH_24 = [  # thirty-ninth session: a block comment the editor closed on its line (``/** | */``)
    ('j1.js', 'javascript', '/** | */\nfunction add(a, b) {\n  return a + b;\n}\n'),
    ('j2.ts', 'typescript', 'export class Cache<T> {\n  private items = new Map<string, T>();\n\n  /** | */\n  get(key: string): T | undefined {\n    return this.items.get(key);\n  }\n}\n'),
    ('j3.java', 'java', 'public class MathUtil {\n    /** | */\n    public static int clamp(int x, int lo, int hi) {\n        return Math.max(lo, Math.min(hi, x));\n    }\n}\n'),
    ('j4.c', 'c', '/* | */\nint add(int a, int b) { return a + b; }\n'),
]
BATCH_25 = [  # thirty-ninth session: more everyday places (super(), finally, fetch errors, SQL, shell, Docker, CI, CSS)
    ('sup.py', 'python', 'class Admin(User):\n    def __init__(self, name, email, level):\n        super().__init__(|)\n        self.level = level\n'),
    ('fin.py', 'python', 'def read(path):\n    f = open(path)\n    try:\n        return f.read()\n    finally:\n        |\n'),
    ('err.js', 'javascript', 'async function load(url) {\n  const res = await fetch(url);\n  if (!res.ok) {\n    |\n  }\n  return res.json();\n}\n'),
    ('q.py', 'python', 'def find_user(conn, user_id):\n    cur = conn.cursor()\n    cur.execute("SELECT id, name FROM users WHERE id = |", (user_id,))\n    return cur.fetchone()\n'),
    ('fn.sh', 'shellscript', '#!/bin/bash\n\nlog() {\n  |\n}\n\nlog "starting"\n'),
    ('Dockerfile', 'dockerfile', 'FROM python:3.12-slim\nWORKDIR /app\nCOPY requirements.txt .\nRUN |\nCOPY . .\nCMD ["python", "main.py"]\n'),
    ('ci.yml', 'yaml', 'name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - |\n'),
    ('filt.py', 'python', 'def evens(xs):\n    return [x for x in xs if |]\n'),
    ('gen.ts', 'typescript', 'function first<T>(items: T[]): T {\n  return |;\n}\n'),
    ('env.py', 'python', 'import os\n\nDATABASE_URL = os.environ.get(|)\n'),
    ('main.go', 'go', 'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n\tif len(os.Args) < 2 {\n\t\t|\n\t}\n\tfmt.Println(os.Args[1])\n}\n'),
    ('retry.py', 'python', 'import time\n\n\ndef retry(fn, attempts=3, delay=1.0):\n    for attempt in range(attempts):\n        try:\n            return fn()\n        except Exception:\n            |\n'),
    ('cls.css', 'css', '.button {\n  padding: 8px 16px;\n  |\n}\n'),
    ('app.rs', 'rust', 'use std::collections::HashMap;\n\nfn count_words(text: &str) -> HashMap<&str, usize> {\n    let mut counts = HashMap::new();\n    for word in text.split_whitespace() {\n        |\n    }\n    counts\n}\n'),
]
BATCH_26 = [  # fortieth session: a triple quote in a comment, a ''' docstring or a string above the cursor, code below a multi-line docstring
    ('gen.py', 'python', 'QUOTE = \'"""\'\n\n\ndef render(name, doc):\n    lines = [f"def {name}():"]\n    |\n\n\ndef indent(text, by=4):\n    """Indent every line of text.\n\n    Blank lines stay blank.\n    """\n    pad = " " * by\n    return "\\n".join(pad + ln if ln.strip() else ln for ln in text.splitlines())\n'),
    ('tools.py', 'python', 'def strip_quotes(s):\n    \'\'\'Remove the """ around s.\'\'\'\n    return s.strip(\'"\')\n\n\ndef total(xs):\n    result = 0\n    for x in xs:\n        |\n\n\ndef mean(xs):\n    """Mean of xs.\n\n    Empty: 0.\n    """\n    return total(xs) / len(xs) if xs else 0\n'),
    ('cmt.py', 'python', 'import re\n\n# docstrings start with """ or \'\'\'\nDOC = re.compile(r"^\\s*[rb]?[\\"\']{3}")\n\n\ndef find_docs(lines):\n    found = []\n    for i, line in enumerate(lines):\n        |\n    return found\n\n\ndef main():\n    """Print the docstring lines.\n\n    Reads stdin.\n    """\n    print(find_docs(open(0).read().splitlines()))\n'),
    ('after.py', 'python', 'QUOTE = \'"""\'\n\n\ndef wrap(text):\n    """|"""\n    return QUOTE + text + QUOTE\n'),
    ('Query.kt', 'kotlin', '// SQL lives in a """ raw string below\nclass UserRepo(private val db: Database) {\n    fun count(): Int {\n        |\n    }\n\n    val query = """\n        SELECT id, name\n        FROM users\n    """.trimIndent()\n}\n'),
    ('fresh.py', 'python', 'QUOTE = \'"""\'\n\n\ndef quote_lines(lines):\n    |\n\n\ndef unquote(text):\n    """Strip QUOTE from both ends.\n\n    Text without them is returned as it is.\n    """\n    return text.removeprefix(QUOTE).removesuffix(QUOTE)\n'),
    ('klass.py', 'python', '# templates use """ for docstrings\n\n\nclass Template:\n    |\n\n\ndef render(t, **kw):\n    """Render t.\n\n    Keyword arguments fill its fields.\n    """\n    return t.text.format(**kw)\n'),
]
BATCH_27 = [  # fortieth session: more everyday places (after a return, relative imports, decorators, HTML closing tags, Vue, Lua, SQL comments, Markdown lists, except-as, __post_init__, C# using)
    ('ret.py', 'python', 'def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n        |\n    return min(x, hi)\n'),
    ('views.py', 'python', 'from flask import Flask, jsonify\n\napp = Flask(__name__)\n\n\n@app.route("/users/<int:user_id>")\ndef get_user(user_id):\n    return jsonify({"id": user_id})\n\n\n@app.route("|")\n'),
    ('rel.py', 'python', 'from .models import User, Order\nfrom .db import session\n\n\ndef orders_of(user: User) -> list[Order]:\n    |\n'),
    ('page.html', 'html', '<ul>\n  <li>Home</li>\n  <li>About</li>\n</|\n'),
    ('Comp.vue', 'vue', '<template>\n  <button @click="increment">{{ count }}</button>\n</template>\n\n<script setup>\nimport { ref } from "vue";\n\nconst count = ref(0);\n|\n</script>\n'),
    ('m.lua', 'lua', 'local M = {}\n\nfunction M.split(s, sep)\n  local parts = {}\n  |\nend\n\nreturn M\n'),
    ('q.sql', 'sql', '-- top customers by revenue\nSELECT c.name, SUM(o.total) AS revenue\nFROM customers c\nJOIN orders o ON o.customer_id = c.id\n|\n'),
    ('notes.md', 'markdown', '# Release checklist\n\n- Bump the version in `pyproject.toml`\n- Update the changelog\n- |\n'),
    ('exc.py', 'python', 'import json\n\n\ndef load(path):\n    try:\n        with open(path) as f:\n            return json.load(f)\n    except json.JSONDecodeError as e:\n        |\n'),
    ('post.py', 'python', 'from dataclasses import dataclass, field\n\n\n@dataclass\nclass Order:\n    items: list[float] = field(default_factory=list)\n    discount: float = 0.0\n\n    def __post_init__(self):\n        |\n'),
    ('Prog.cs', 'csharp', 'using System;\nusing System.Linq;\n\nclass Program\n{\n    static void Main(string[] args)\n    {\n        var nums = new[] { 3, 1, 2 };\n        |\n    }\n}\n'),
    ('fmt.py', 'python', 'def show(price):\n    print(f"Total: {price:|}")\n'),
    ('main.py', 'python', 'import sys\n\n\ndef main(argv: list[str]) -> int:\n    print(argv)\n    return 0\n\n\nif __name__ == "__main__":\n    |\n'),
    ('srt.py', 'python', 'people = [("ann", 31), ("bob", 25)]\nby_age = sorted(people, key=|)\n'),
]
BATCH_28 = [  # fortieth session: bodies typed every day (with, for over items, a property, a Go method, Default, a test's next assert, a shell loop) and after break/raise
    ('attr.py', 'python', 'class Cart:\n    def __init__(self):\n        self.items = []\n\n    def add(self, item):\n        self.items.|\n'),
    ('prop.py', 'python', 'class Cart:\n    def __init__(self, prices):\n        self.prices = prices\n\n    @property\n    def total(self):\n        |\n'),
    ('map.js', 'javascript', 'const users = [{ name: "ann", age: 31 }, { name: "bob", age: 25 }];\nconst names = users.map(|);\n'),
    ('user.ts', 'typescript', 'interface User {\n  id: number;\n  |\n}\n'),
    ('with.py', 'python', 'import json\n\n\ndef load(path):\n    with open(path) as f:\n        |\n'),
    ('items.py', 'python', 'def show(config: dict) -> None:\n    for key, value in config.items():\n        |\n'),
    ('srv.go', 'go', 'package main\n\ntype Server struct {\n\taddr string\n}\n\nfunc (s *Server) Start() error {\n\t|\n}\n'),
    ('def.rs', 'rust', 'pub struct Config {\n    pub verbose: bool,\n    pub retries: u32,\n}\n\nimpl Default for Config {\n    fn default() -> Self {\n        |\n    }\n}\n'),
    ('test_math.py', 'python', 'from mathlib import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n    |\n'),
    ('loop.sh', 'shellscript', '#!/bin/bash\nfor f in *.txt; do\n  |\ndone\n'),
    ('log.py', 'python', 'import logging\n\nlogger = logging.getLogger(|)\n'),
    ('cli.py', 'python', 'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--verbose", |)\n'),
    ('brk.py', 'python', 'def read_all(f):\n    lines = []\n    while True:\n        line = f.readline()\n        if not line:\n            break\n        |\n    return lines\n'),
    ('rsz.py', 'python', 'def get(d, key):\n    try:\n        return d[key]\n    except KeyError:\n        raise\n        |\n'),
]
BATCH_29 = [  # fortieth session: around exits (the new rules must not misfire): switch cases, match arms, Ruby modifiers, hoisted functions, early returns
    ('sw.c', 'c', 'int kind(char c) {\n    switch (c) {\n    case \'a\':\n        return 1;\n    |\n    }\n    return 0;\n}\n'),
    ('sw.go', 'go', 'package main\n\nfunc name(n int) string {\n\tswitch n {\n\tcase 1:\n\t\treturn "one"\n\t|\n\t}\n\treturn "many"\n}\n'),
    ('m.py', 'python', 'def area(shape):\n    match shape:\n        case ("circle", r):\n            return 3.14159 * r * r\n        |\n'),
    ('rb.rb', 'ruby', 'def fetch(key)\n  return nil if key.nil?\n  |\nend\n'),
    ('hoist.js', 'javascript', 'function total(items) {\n  return sum(items);\n\n  |\n}\n'),
    ('early.py', 'python', 'def parse(text):\n    if not text:\n        return None\n    |\n'),
    ('loopc.py', 'python', 'def first_even(xs):\n    for x in xs:\n        if x % 2:\n            continue\n        |\n'),
    ('kt.kt', 'kotlin', 'fun sign(x: Int): String {\n    if (x < 0) {\n        return "neg"\n    }\n    |\n}\n'),
    ('case.sh', 'shellscript', '#!/bin/bash\ncase "$1" in\n  start)\n    echo starting\n    ;;\n  |\nesac\n'),
    ('thr.ts', 'typescript', 'function check(x: number): number {\n  if (x < 0) {\n    throw new Error("negative");\n  }\n  |\n}\n'),
    ('gen.py', 'python', 'def make(kind):\n    if kind == "a":\n        return A()\n    elif kind == "b":\n        |\n'),
    ('after.rs', 'rust', 'fn parse(s: &str) -> Option<u32> {\n    if s.is_empty() {\n        return None;\n    }\n    |\n}\n'),
]
BATCH_30 = [  # fortieth session: more bodies and arguments typed every day (dunder methods, a None check, try blocks, useEffect, signatures, generators, ORM columns, fixtures, loops in Go/C/Java, join)
    ('eq.py', 'python', 'class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n    def __eq__(self, other):\n        |\n'),
    ('none.py', 'python', 'def name_of(user):\n    if user is None:\n        |\n    return user.name\n'),
    ('try.js', 'javascript', 'async function save(data) {\n  try {\n    |\n  } catch (e) {\n    console.error(e);\n  }\n}\n'),
    ('eff.jsx', 'javascriptreact', 'import { useEffect, useState } from "react";\n\nexport function Clock() {\n  const [now, setNow] = useState(new Date());\n  useEffect(() => {\n    |\n  }, []);\n  return <span>{now.toLocaleTimeString()}</span>;\n}\n'),
    ('sig.py', 'python', 'import requests\n\n\ndef fetch(url: str, timeout: |\n'),
    ('gen.py', 'python', 'def chunks(xs, n):\n    for i in range(0, len(xs), n):\n        |\n'),
    ('orm.py', 'python', 'from sqlalchemy import Column, Integer, String\nfrom .base import Base\n\n\nclass User(Base):\n    __tablename__ = "users"\n\n    id = Column(Integer, primary_key=True)\n    name = Column(|)\n'),
    ('conftest.py', 'python', 'import pytest\n\nfrom app import create_app\n\n\n@pytest.fixture\ndef client():\n    |\n'),
    ('rng.go', 'go', 'package main\n\nfunc total(items []Item) int {\n\tsum := 0\n\tfor _, item := range items {\n\t\t|\n\t}\n\treturn sum\n}\n'),
    ('for.c', 'c', 'int sum(const int *a, int n) {\n    int s = 0;\n    for (int i = 0; i < n; i++) {\n        |\n    }\n    return s;\n}\n'),
    ('Each.java', 'java', 'import java.util.List;\n\nclass Printer {\n    static void printAll(List<String> list) {\n        for (String s : list) {\n            |\n        }\n    }\n}\n'),
    ('join.py', 'python', 'def describe(tags):\n    return ", ".join(|)\n'),
    ('cmd.rs', 'rust', 'fn run(cmd: &str) {\n    match cmd {\n        "start" => start(),\n        |\n    }\n}\n'),
    ('arr.json', 'json', '{\n  "users": [\n    { "id": 1, "name": "ann" },\n    |\n  ]\n}\n'),
]
BATCH_31 = [  # fortieth session: inside a line, code right of the cursor, in everyday calls
    ('ff.py', 'python', 'def greet(name, age):\n    print(f"{|}")\n'),
    ('and.js', 'javascript', 'function ok(x, y) {\n  if (x > 0 && |) {\n    return true;\n  }\n  return false;\n}\n'),
    ('init.py', 'python', 'class Account:\n    def __init__(self, |):\n        self.owner = owner\n        self.balance = balance\n'),
    ('ret.py', 'python', 'def health():\n    ok = db.ping()\n    return {"status": |}\n'),
    ('st.py', 'python', 'def test_home(client):\n    response = client.get("/")\n    assert response.status_code == |\n'),
    ('rng.py', 'python', 'def squares(n):\n    out = []\n    for i in range(|):\n        out.append(i * i)\n    return out\n'),
    ('op.py', 'python', 'def count_lines(path):\n    with open(|) as f:\n        return sum(1 for _ in f)\n'),
    ('lc.py', 'python', 'def doubled(values):\n    return [v * 2 for v in |]\n'),
    ('rv.py', 'python', 'def check(value):\n    if value < 0:\n        raise ValueError(f"bad value: {|}")\n    return value\n'),
    ('lg.py', 'python', 'import logging\n\nlog = logging.getLogger(__name__)\n\n\ndef load(items):\n    log.info("loaded %d items", |)\n'),
    ('rec.ts', 'typescript', 'const counts: Record<string, |> = {};\nfor (const w of words) counts[w] = (counts[w] ?? 0) + 1;\n'),
    ('pf.go', 'go', 'package main\n\nimport "fmt"\n\nfunc show(name string, n int) {\n\tfmt.Printf("%s has %d items\\n", |)\n}\n'),
    ('pf.c', 'c', '#include <stdio.h>\n\nvoid show(const char *name, int n) {\n    printf("%s has %d items\\n", |);\n}\n'),
    ('pl.rs', 'rust', 'fn show(name: &str, n: usize) {\n    println!("{} has {} items", |);\n}\n'),
]
BATCH_32 = [  # fortieth session: triple quotes in other languages (Julia and Elixir docs, Kotlin, Swift and Scala multi-line strings, TOML), and Python strings holding quotes
    ('f.jl', 'julia', '"""|"""\nfunction area(r)\n    return pi * r^2\nend\n'),
    ('doc.ex', 'elixir', 'defmodule Math do\n  @doc """\n  |\n  """\n  def square(x), do: x * x\nend\n'),
    ('Q.kt', 'kotlin', 'val query = """\n    SELECT id, name\n    |\n""".trimIndent()\n'),
    ('m.swift', 'swift', 'let banner = """\n    Welcome!\n    |\n    """\nprint(banner)\n'),
    ('cfg.toml', 'toml', '[tool.app]\ndescription = """\n|\n"""\nversion = "1.0"\n'),
    ('S.scala', 'scala', 'object Main {\n  // a """ in a comment\n  def greet(name: String): String = {\n    |\n  }\n}\n'),
    ('q.py', 'python', 'SQL = """\nSELECT id\n  FROM users\n WHERE |\n"""\n'),
    ('tpl.py', 'python', "TEMPLATE = '''\\n<h1>{title}</h1>\\n'''\n\n\ndef render(title):\n    |\n"),
    ('esc.py', 'python', 'def quote(s):\n    return "\\"" + s + "\\""\n\n\ndef unquote(s):\n    |\n'),
]
BATCH_33 = [  # fortieth session: web frameworks typed every day (FastAPI, Django, Express middleware, a React component's props, Next.js API route, Go handler, Rust ?)
    ('api.py', 'python', 'from fastapi import FastAPI, HTTPException\n\napp = FastAPI()\nitems = {}\n\n\n@app.get("/items/{item_id}")\ndef read_item(item_id: int):\n    |\n'),
    ('models.py', 'python', 'from django.db import models\n\n\nclass Article(models.Model):\n    title = models.CharField(max_length=200)\n    |\n'),
    ('views.py', 'python', 'from django.shortcuts import get_object_or_404, render\n\nfrom .models import Article\n\n\ndef detail(request, pk):\n    |\n'),
    ('mw.js', 'javascript', 'function requireAuth(req, res, next) {\n  |\n}\n\nmodule.exports = requireAuth;\n'),
    ('Card.tsx', 'typescriptreact', 'type CardProps = { title: string; body: string };\n\nexport function Card({ title, body }: CardProps) {\n  return (\n    |\n  );\n}\n'),
    ('hello.ts', 'typescript', 'import type { NextApiRequest, NextApiResponse } from "next";\n\nexport default function handler(req: NextApiRequest, res: NextApiResponse) {\n  |\n}\n'),
    ('h.go', 'go', 'package main\n\nimport (\n\t"encoding/json"\n\t"net/http"\n)\n\nfunc health(w http.ResponseWriter, r *http.Request) {\n\t|\n}\n'),
    ('io.rs', 'rust', 'use std::fs;\nuse std::io;\n\nfn read_config(path: &str) -> io::Result<String> {\n    |\n}\n'),
    ('pd.py', 'python', 'import pandas as pd\n\ndf = pd.read_csv("sales.csv")\nmonthly = df.groupby("month")["revenue"].|\n'),
    ('plot.py', 'python', 'import matplotlib.pyplot as plt\n\nxs = list(range(10))\nys = [x * x for x in xs]\nplt.plot(xs, ys)\n|\n'),
    ('Makefile', 'makefile', '.PHONY: test lint\n\ntest:\n\tpytest -q\n\nlint:\n\t|\n'),
    ('find.sh', 'shellscript', '#!/bin/bash\n# count the lines of every Python file\nfind . -name "*.py" -exec |\n'),
]
BATCH_34 = [  # fortieth session: inserting between existing code (an import among imports, a dict entry, a test between tests, an else before code, a method between methods, a match arm, a CSS rule)
    ('imp.py', 'python', 'import os\nimport sys\n|\nimport json\n\n\ndef main():\n    print(json.dumps(dict(os.environ)), file=sys.stderr)\n'),
    ('cfg.py', 'python', 'DEFAULTS = {\n    "host": "localhost",\n    |\n    "debug": False,\n}\n'),
    ('test_x.py', 'python', 'from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n|\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n'),
    ('els.py', 'python', 'def label(n):\n    if n > 0:\n        s = "positive"\n    |\n    return s\n'),
    ('meth.py', 'python', 'class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n    |\n\n    def __len__(self):\n        return len(self.items)\n'),
    ('arm.rs', 'rust', 'fn describe(n: i32) -> &\'static str {\n    match n {\n        0 => "zero",\n        |\n        _ => "many",\n    }\n}\n'),
    ('st.css', 'css', 'body {\n  margin: 0;\n}\n\n|\n\nfooter {\n  padding: 1rem;\n}\n'),
    ('ts.ts', 'typescript', 'export function parse(input: string): number {\n  const trimmed = input.trim();\n  |\n  return Number(trimmed);\n}\n'),
    ('go2.go', 'go', 'package main\n\nimport (\n\t"fmt"\n\t|\n)\n\nfunc main() {\n\tfmt.Println(strings.ToUpper("hi"), os.Args)\n}\n'),
    ('arr.js', 'javascript', 'const routes = [\n  { path: "/", component: Home },\n  |\n  { path: "*", component: NotFound },\n];\n'),
]
BATCH_35 = [  # forty-first session: exits whose brackets close on a line of their own (return ( ... ), return { ... };), calls and callbacks closed the same way, and everyday places (with open, basicConfig, add_argument, useState, Display, defer, CREATE TABLE, set -euo pipefail, a type argument, the __main__ guard)
    ('mret.py', 'python', 'def area(w, h, pad):\n    return (\n        (w + pad)\n        * (h + pad)\n    )\n    |\n\n\ndef main():\n    print(area(1, 2, 3))\n'),
    ('oret.js', 'javascript', 'function point(x, y) {\n  return {\n    x: x,\n    y: y,\n  };\n  |\n}\n'),
    ('call.py', 'python', 'def mean(xs):\n    total = sum(\n        x for x in xs\n    )\n    |\n'),
    ('cb.js', 'javascript', 'function names(users) {\n  const out = [];\n  users.forEach((u) => {\n    out.push(u.name);\n  });\n  |\n}\n'),
    ('withf.py', 'python', 'import json\n\n\ndef load(path):\n    with open(path) as f:\n        |\n'),
    ('logcfg.py', 'python', 'import logging\n\nlogging.basicConfig(|)\nlog = logging.getLogger(__name__)\n'),
    ('argp.py', 'python', 'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--verbose", |)\nargs = parser.parse_args()\n'),
    ('st.tsx', 'typescriptreact', 'import { useState } from "react";\n\nexport function Counter() {\n  const [count, setCount] = useState(|);\n  return <button onClick={() => setCount(count + 1)}>{count}</button>;\n}\n'),
    ('disp.rs', 'rust', 'use std::fmt;\n\nstruct Point {\n    x: i32,\n    y: i32,\n}\n\nimpl fmt::Display for Point {\n    |\n}\n'),
    ('defer.go', 'go', 'package main\n\nimport "os"\n\nfunc read(name string) error {\n\tf, err := os.Open(name)\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer |\n\treturn nil\n}\n'),
    ('tbl.sql', 'sql', 'CREATE TABLE users (\n  id INTEGER PRIMARY KEY,\n  |\n);\n'),
    ('run.sh', 'shellscript', '#!/usr/bin/env bash\nset -euo pipefail\n|\n'),
    ('hint.py', 'python', "def parse(s: str) -> dict[str, |]:\n    return {k: int(v) for k, v in (p.split('=') for p in s.split(','))}\n"),
    ('mainguard.py', 'python', 'import sys\n\n\ndef main(argv):\n    print(argv)\n    return 0\n\n\nif __name__ == "__main__":\n    |\n'),
]
cases = {1: BATCH_1, 2: BATCH_2, 3: BATCH_3, 4: BATCH_4, 5: BATCH_5, 6: BATCH_6, 7: BATCH_7, 8: BATCH_8, 9: BATCH_9, 10: BATCH_10, 11: BATCH_11, 12: BATCH_12, 13: BATCH_13, 14: BATCH_14, 15: BATCH_15, 16: BATCH_16, 17: BATCH_17, 18: BATCH_18, 19: BATCH_19, 20: BATCH_20, 21: BATCH_21, 22: BATCH_22, 23: BATCH_23, 24: BATCH_24, 25: BATCH_25, 26: BATCH_26, 27: BATCH_27, 28: BATCH_28, 29: BATCH_29, 30: BATCH_30, 31: BATCH_31, 32: BATCH_32, 33: BATCH_33, 34: BATCH_34, 35: BATCH_35}[BATCH]
for name, lang, text in cases:
    cursor = text.index("|")
    text = text.replace("|", "", 1)
    before = text[:cursor]
    line = before.count("\n")
    col = len(before[before.rfind("\n") + 1 :].encode("utf-16-le")) // 2  # LSP columns: UTF-16 code units
    uri = (ws / name).as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}})
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col},
                                                  "context": {"triggerKind": 1}}, timeout=120)  # fmt: skip
    items = (a.get("result") or {}).get("items") or []
    shown = items[0]["insertText"] if items else None
    around = before[-40:] + "|" + text[cursor : cursor + 20]
    print(f"{name}: {json.dumps(around)}\n    -> {json.dumps(shown)}")
print("exit", cl.shutdown())
