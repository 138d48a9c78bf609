"""The open document's line index, kept up to date edit by edit (lsp_server.documents)."""

from hypothesis import given, settings, strategies as st
from lsprotocol import types

from lsp_server.documents import LineIndex, OpenDocuments, line_starts

# line breaks of every kind and the characters that join them ("\r" + "\n" is one break)
TEXT = st.text(alphabet="ab\r\n\U0001f600", max_size=40)


@settings(max_examples=600, deadline=None)
@given(TEXT, TEXT, st.data())
def test_an_edited_index_equals_a_fresh_scan(text, new, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    edited = LineIndex(text).edited(start, end, new)
    assert edited.text == text[:start] + new + text[end:]
    assert edited.starts == line_starts(edited.text)


def test_breaks_joined_and_split_at_the_edges_of_an_edit():
    for text, start, end, new in [
        ("a\r", 2, 2, "\nb"),  # a "\r" before the edit joins the "\n" it inserts
        ("a\nb", 1, 1, "\r"),  # a "\r" inserted before a "\n"
        ("a\r\nb", 2, 2, "x"),  # a "\r\n" split
        ("a\r\nb", 1, 2, ""),  # its "\r" deleted
        ("\n\n\n", 0, 3, "x\r"),
        ("ab\r\ncd\r\nef", 5, 5, "\r\n"),
    ]:
        edited = LineIndex(text).edited(start, end, new)
        assert edited.starts == line_starts(edited.text), (text, start, end, new)


def test_a_document_keeps_its_index_through_incremental_changes():
    ws = OpenDocuments(None, types.TextDocumentSyncKind.Incremental)
    uri = "file:///x.py"
    ws.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=1, text="def f():\r\n    pass\n"))
    doc = ws.get_text_document(uri)
    doc.index  # built once
    expected = doc.source
    for line, ch, new in [(1, 8, "\n    return 1"), (0, 8, "\r"), (2, 0, "x"), (0, 0, "# a\n")]:
        pos = types.Position(line=line, character=ch)
        ws.update_text_document(types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                                types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=new))  # fmt: skip
        at = LineIndex(expected).clamped_offset(pos)  # the same edit on a plain string
        expected = expected[:at] + new + expected[at:]
        kept = doc.__dict__["_index"]
        assert kept.text is doc.source  # carried through the change, not dropped and rescanned
        assert kept.starts == line_starts(doc.source)
    assert doc.source == expected
