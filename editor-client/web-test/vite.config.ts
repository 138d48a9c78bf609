import * as path from 'node:path';
import { defineConfig } from 'vite';

// The extension's sources (../vscode/src) import `vscode` and `vscode-languageclient`:
// dedupe makes them resolve to this package's copies (`vscode` is monaco-vscode-api's
// extension API here).
export default defineConfig({
    base: './',
    resolve: {
        dedupe: ['vscode', 'vscode-languageclient', 'vscode-jsonrpc', 'vscode-languageserver-protocol', 'vscode-languageserver-types'],
        alias: {
            path: path.resolve(import.meta.dirname, 'node_modules/path-browserify/index.js'),
            os: path.resolve(import.meta.dirname, 'src/shims/os.ts'),
        },
    },
    define: { 'process.env': '{}', 'process.platform': '"linux"' },
    worker: { format: 'es' },
    build: { target: 'es2022', outDir: 'dist', chunkSizeWarningLimit: 100000, reportCompressedSize: false },
    logLevel: 'warn',
});
