/**
 * Where the cursor rests, told to the server (`fastcoder/cursor`): once the cursor of a
 * document the client serves has not moved for `REST_MS`, one notification with its
 * position. The server then prepares the suggestion there in the background
 * (`warmAtCursor`), so the first keystroke after opening a file or jumping in a long
 * one does not wait for a ~2,000-token prefill. Only an empty selection in a `file` or
 * `untitled` editor of a served language is reported, only while the client runs and
 * FastCoder is enabled; the same position is not sent twice in a row.
 */
import * as vscode from 'vscode';

/** URI schemes of the documents the server serves: files, untitled buffers, notebook cells. */
export const SCHEMES: readonly string[] = ['file', 'untitled', 'vscode-notebook-cell'];

export const CURSOR_NOTIFICATION = 'fastcoder/cursor';
/** How long the cursor must stay still before it is reported (ms). */
export const REST_MS = 300;

export interface NotifyingClient {
    isRunning(): boolean;
    sendNotification(method: string, params: unknown): Promise<void>;
    code2ProtocolConverter: { asUri(uri: vscode.Uri): string };
}

export interface CursorParams {
    textDocument: { uri: string };
    position: { line: number; character: number };
}

type Timer = ReturnType<typeof setTimeout>;

export class CursorReporter implements vscode.Disposable {
    private timer: Timer | undefined;
    private last = '';

    constructor(
        private readonly getClient: () => NotifyingClient | undefined,
        private readonly enabled: () => boolean,
        private readonly languages: ReadonlySet<string>,
        private readonly restMs: number = REST_MS,
    ) {}

    /** `vscode.window.onDidChangeTextEditorSelection`: (re)arm the rest timer. */
    onSelection(event: vscode.TextEditorSelectionChangeEvent): void {
        this.cancel();
        const editor = event.textEditor;
        const selection = event.selections.length === 1 ? event.selections[0] : undefined;
        const document = editor.document;
        if (!selection || !selection.isEmpty || !this.languages.has(document.languageId)) {
            return;
        }
        if (!SCHEMES.includes(document.uri.scheme)) {
            return;
        }
        const position = selection.active;
        const version = document.version;
        this.timer = setTimeout(() => {
            this.timer = undefined;
            // typed meanwhile: the selection event of that edit re-arms the timer
            if (document.version !== version) {
                return;
            }
            this.send(document.uri, position.line, position.character, version);
        }, this.restMs);
    }

    private send(uri: vscode.Uri, line: number, character: number, version: number): void {
        const client = this.getClient();
        if (!client || !client.isRunning() || !this.enabled()) {
            return;
        }
        const params: CursorParams = {
            textDocument: { uri: client.code2ProtocolConverter.asUri(uri) },
            position: { line, character },
        };
        const key = `${params.textDocument.uri}|${version}|${line}|${character}`;
        if (key === this.last) {
            return;
        }
        this.last = key;
        client.sendNotification(CURSOR_NOTIFICATION, params).catch(() => {
            // the client stopped meanwhile: nothing to tell
        });
    }

    private cancel(): void {
        if (this.timer !== undefined) {
            clearTimeout(this.timer);
            this.timer = undefined;
        }
    }

    dispose(): void {
        this.cancel();
    }
}
