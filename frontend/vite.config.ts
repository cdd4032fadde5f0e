/// <reference types="vitest/config" />
import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'

// `npm run dev` serves the console on :5173 and forwards the product's own paths to the API
// (GPUCLOUD_API, default http://127.0.0.1:8000, e.g. a `make run`), so the session cookie and CSRF work as in
// production where Django serves the built files on the same origin.
const api = process.env.GPUCLOUD_API ?? 'http://127.0.0.1:8000'
const proxied = ['/api', '/oidc', '/healthz', '/readyz', '/invitations', '/signup', '/sign-in']

export default defineConfig({
  plugins: [react()],
  server: {
    proxy: Object.fromEntries(proxied.map((p) => [p, { target: api, changeOrigin: false }])),
  },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 900,
  },
  test: {
    environment: 'jsdom',
    setupFiles: ['./src/test/setup.ts'],
    css: false,
    globals: true,
  },
})
