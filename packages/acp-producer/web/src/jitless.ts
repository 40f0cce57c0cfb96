// Imported first (main.tsx): the SDK validates with zod, and zod probes `new Function` once,
// at the SDK's module setup, unless told not to; the page's CSP (no 'unsafe-eval') refuses it
// and reports a violation, though zod copes.
import { config } from "zod";

config({ jitless: true });
