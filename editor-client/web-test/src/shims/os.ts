// `os` for the browser bundle: settings.ts only asks for the home folder (path expansion).
export function homedir(): string {
    return '/';
}
export default { homedir };
