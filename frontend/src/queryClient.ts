import { QueryClient } from '@tanstack/react-query'
import { ApiError } from './api/client'

/** The console's one query cache (main.tsx provides it; route loaders prefetch into it). */
export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // a 4xx (not found, forbidden, signed out) is an answer, not a glitch: show it at once
      retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
      refetchOnWindowFocus: true,
    },
  },
})
