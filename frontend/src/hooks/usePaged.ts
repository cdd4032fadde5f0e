import { keepPreviousData, useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { cursorOf } from '../api/client'

export interface Page<T> {
  results: T[]
  next?: string | null
  previous?: string | null
}

/** A server-paged list: the API's cursors (`next`/`previous`) drive the pager; the page being read stays on screen
 * while the next one loads; a new `key` (e.g. other filters) starts again on page 1. `fetchPage(cursor)` asks for
 * one page. */
export function usePaged<T>(key: readonly unknown[], fetchPage: (cursor?: string) => Promise<Page<T>>, options?: {
  refetchInterval?: number | false
  enabled?: boolean
}) {
  // the position belongs to the key it was read under: another key (a filter changed) starts on page 1
  const keyText = JSON.stringify(key)
  const [position, setPosition] = useState<{ key: string; cursor?: string; pageNumber: number }>({ key: keyText, pageNumber: 1 })
  const { cursor, pageNumber } = position.key === keyText ? position : { cursor: undefined, pageNumber: 1 }
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
      setPosition({ key: keyText, cursor: next, pageNumber: pageNumber + 1 })
    },
    goPrevious: () => {
      if (!query.data?.previous) return
      setPosition({ key: keyText, cursor: previous, pageNumber: Math.max(1, pageNumber - 1) })
    },
    reset: () => setPosition({ key: keyText, pageNumber: 1 }),
  }
}
