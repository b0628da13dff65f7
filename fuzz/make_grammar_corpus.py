#!/usr/bin/env python3
"""Writes fuzz/corpus/grammar: seed grammars for grammar_fuzz (first byte even: GBNF text;
odd: a JSON Schema). Run from the repository root."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_writer import write_corpus  # noqa: E402

GBNF = [
    'root ::= "{" ws "\\"answer\\":" ws answer ws "}"\nanswer ::= "yes" | "no" | [0-9]+ ( "." [0-9]{1,3} )?\n'
    'ws ::= [ \\t\\n]{0,2}\n',
    'root ::= list\nlist ::= "[" ( item ( "," item )* )? "]"\nitem ::= [0-9] | list\n',
    'root ::= [^"\\\\]{0,8} "\u00e9\u20ac" .\n',
]
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
     "required": ["name"], "additionalProperties": False},
    {"$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
     "anyOf": [{"$ref": "#/$defs/p"}, {"type": "string", "pattern": "^[a-c]+d?$"}, {"type": "boolean"},
               {"type": "null"}]},
    {"type": "string", "format": "date-time"},
]
seeds = [bytes([0]) + g.encode() for g in GBNF] + [bytes([1]) + json.dumps(s).encode() for s in SCHEMAS]
write_corpus("fuzz/corpus/grammar", ((f"seed{i}", s) for i, s in enumerate(seeds)))
