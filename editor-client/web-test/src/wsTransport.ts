/**
 * The browser transport for the extension's activation code: vscode-languageclient's
 * browser client over a WebSocket (one JSON-RPC message per WebSocket message) to
 * `bridge.mjs`, which starts `fastcoder serve` and speaks LSP over its stdio.
 * Everything else (controller.ts, the inline completion feature) is the extension's.
 */
import {
    AbstractMessageReader,
    AbstractMessageWriter,
    DataCallback,
    Disposable,
    LanguageClient,
    Message,
    MessageReader,
    MessageTransports,
    MessageWriter,
} from 'vscode-languageclient/browser';
import type { Transport } from '../../vscode/src/controller';

class WebSocketReader extends AbstractMessageReader implements MessageReader {
    private callback: DataCallback | undefined;
    private readonly pending: Message[] = [];

    constructor(socket: WebSocket) {
        super();
        socket.addEventListener('message', (event) => {
            let message: Message;
            try {
                message = JSON.parse(String(event.data)) as Message;
            } catch (err) {
                this.fireError(err);
                return;
            }
            if (this.callback) {
                this.callback(message);
            } else {
                this.pending.push(message);
            }
        });
        socket.addEventListener('error', () => this.fireError(new Error('WebSocket error')));
        socket.addEventListener('close', () => this.fireClose());
    }

    listen(callback: DataCallback): Disposable {
        this.callback = callback;
        for (const message of this.pending.splice(0)) {
            callback(message);
        }
        return Disposable.create(() => {
            this.callback = undefined;
        });
    }
}

class WebSocketWriter extends AbstractMessageWriter implements MessageWriter {
    constructor(private readonly socket: WebSocket) {
        super();
    }

    async write(message: Message): Promise<void> {
        if (this.socket.readyState !== WebSocket.OPEN) {
            const error = new Error('WebSocket is closed');
            this.fireError([error, message, undefined]);
            throw error;
        }
        this.socket.send(JSON.stringify(message));
    }

    end(): void {
        this.socket.close();
    }
}

function connect(url: string): Promise<MessageTransports> {
    return new Promise((resolve, reject) => {
        const socket = new WebSocket(url);
        socket.addEventListener('open', () =>
            resolve({ reader: new WebSocketReader(socket), writer: new WebSocketWriter(socket) }),
        );
        socket.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)), { once: true });
    });
}

/** Each (re)start opens a new WebSocket; the bridge starts one server per connection. */
export function webSocketTransport(url: string): Transport {
    return {
        async prepare() {
            return {
                description: url,
                createClient: (id, name, clientOptions) => new LanguageClient(id, name, () => connect(url), clientOptions),
            };
        },
    };
}
