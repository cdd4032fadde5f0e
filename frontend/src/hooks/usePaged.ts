import { keepPreviousData, useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { cursorOf } from '../api/client'

export interface Page<T> {
  results: T[]
  next?: string | null
  previous?: string | null
}

/** A server-paged list: the API's cursors (`next`/`previous`) drive the pager; the page being read stays on screen
 * while the next one loads. `fetchPage(cursor)` asks for one page. */
export function usePaged<T>(key: readonly unknown[], fetchPage: (cursor?: string) => Promise<Page<T>>, options?: {
  refetchInterval?: number | false
  enabled?: boolean
}) {
  const [cursor, setCursor] = useState<string | undefined>(undefined)
  const [pageNumber, setPageNumber] = useState(1)
  const query = useQuery({
    queryKey: [...key, cursor ?? ''],
    queryFn: () => fetchPage(cursor),
    placeholderData: keepPreviousData,
    refetchInterval: options?.refetchInterval,
    enabled: options?.enabled,
  })
  const next = cursorOf(query.data?.next)
  const previous = cursorOf(query.data?.previous)
  return {
    ...query,
    pageNumber,
    hasNext: Boolean(query.data?.next),
    hasPrevious: Boolean(query.data?.previous),
    goNext: () => {
      if (!next) return
      setCursor(next)
      setPageNumber((n) => n + 1)
    },
    goPrevious: () => {
      if (!query.data?.previous) return
      setCursor(previous)
      setPageNumber((n) => Math.max(1, n - 1))
    },
    reset: () => {
      setCursor(undefined)
      setPageNumber(1)
    },
  }
}
