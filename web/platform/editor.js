// The submit page's code editor: CodeMirror 6 with Python highlighting, loaded as ES modules
// through index.html's import map. Exposes window.TesseraEditor.create(parent, text) -> an
// object with text(); announces itself with the "tessera-editor" event (platform.js waits for it).
import { basicSetup, EditorView } from "codemirror";
import { python } from "@codemirror/lang-python";
import { keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";

window.TesseraEditor = {
  create(parent, text) {
    const view = new EditorView({
      doc: text,
      // Tab indents; Escape then Tab leaves the editor (CodeMirror's rule), so the keyboard is not trapped.
      extensions: [basicSetup, python(), keymap.of([indentWithTab]),
                   EditorView.contentAttributes.of({ "aria-label": "training script (Python)" })],
      parent,
    });
    return { text: () => view.state.doc.toString(), view };
  },
};
window.dispatchEvent(new Event("tessera-editor"));
