/**
 * `fastcoder/status` notifications → status-bar item.
 */
import * as vscode from 'vscode';

export const STATUS_NOTIFICATION = 'fastcoder/status';

export type ServerState = 'loading' | 'indexing' | 'ready' | 'error';
/** Client-side states on top of the server's. */
export type ClientState = ServerState | 'starting' | 'stopped' | 'disabled';

export interface StatusParams {
    state: ServerState | string;
    message?: string;
}

export interface StatusView {
    text: string;
    tooltip: string;
    /** ThemeColor id for the item's background, if any. */
    background?: string;
}

const KNOWN: readonly ClientState[] = ['loading', 'indexing', 'ready', 'error', 'starting', 'stopped', 'disabled'];

/** Pure mapping: state (+ message) → status-bar text/tooltip/background. */
export function statusView(state: ClientState | string, message?: string): StatusView {
    const msg = (message ?? '').trim();
    const s = (KNOWN as readonly string[]).includes(state) ? (state as ClientState) : undefined;
    const tip = (fallback: string) => (msg ? `FastCoder: ${msg}` : `FastCoder: ${fallback}`);
    switch (s) {
        case 'starting':
            return { text: '$(sync~spin) FastCoder', tooltip: tip('starting the server…') };
        case 'loading':
            return { text: '$(sync~spin) FastCoder: loading', tooltip: tip('loading the model…') };
        case 'indexing':
            return { text: '$(sync~spin) FastCoder: indexing', tooltip: tip('indexing the workspace…') };
        case 'ready':
            return { text: '$(check) FastCoder', tooltip: tip('ready') };
        case 'error':
            return {
                text: '$(error) FastCoder',
                tooltip: tip('error (see Output → FastCoder)'),
                background: 'statusBarItem.errorBackground',
            };
        case 'stopped':
            return {
                text: '$(circle-slash) FastCoder: stopped',
                tooltip: tip('the server is not running'),
                background: 'statusBarItem.warningBackground',
            };
        case 'disabled':
            return { text: '$(circle-slash) FastCoder: off', tooltip: tip('disabled (run "FastCoder: Enable")') };
        default:
            return { text: `FastCoder: ${state}`, tooltip: tip(String(state)) };
    }
}

/** Owns the status-bar item; remembers the last server status. */
export class StatusBar implements vscode.Disposable {
    readonly item: vscode.StatusBarItem;
    private serverState: ClientState = 'starting';
    private serverMessage = '';
    private enabled = true;

    constructor(command = 'fastcoder.showStats') {
        this.item = vscode.window.createStatusBarItem('fastcoder.status', vscode.StatusBarAlignment.Right, 100);
        this.item.name = 'FastCoder';
        this.item.command = command;
        this.render();
        this.item.show();
    }

    /** Handler for the `fastcoder/status` notification. */
    onServerStatus(params: StatusParams | undefined): void {
        if (!params || typeof params.state !== 'string') {
            return;
        }
        this.serverState = params.state as ClientState;
        this.serverMessage = typeof params.message === 'string' ? params.message : '';
        this.render();
    }

    setClientState(state: ClientState, message = ''): void {
        this.serverState = state;
        this.serverMessage = message;
        this.render();
    }

    setEnabled(enabled: boolean): void {
        this.enabled = enabled;
        this.render();
    }

    get state(): ClientState {
        return this.serverState;
    }

    get message(): string {
        return this.serverMessage;
    }

    private render(): void {
        // Disabled wins over "ready"/"loading" but not over an error the user should see.
        const view =
            !this.enabled && this.serverState !== 'error'
                ? statusView('disabled')
                : statusView(this.serverState, this.serverMessage);
        this.item.text = view.text;
        this.item.tooltip = view.tooltip;
        this.item.backgroundColor = view.background ? new vscode.ThemeColor(view.background) : undefined;
    }

    dispose(): void {
        this.item.dispose();
    }
}
