import { Badge } from '@mantine/core'

// Filled badges in dark shades: white text at 4.5:1 or more (WCAG AA), unlike Mantine's light variant.
const COLORS: Record<string, string> = {
  active: 'teal.9',
  stopped: 'gray.7',
  error: 'red.9',
  deleted: 'gray.7',
  deleting: 'grape.8',
  pending: 'blue.8',
  provisioning: 'blue.8',
  starting: 'blue.8',
  stopping: 'grape.8',
  rebooting: 'blue.8',
  resizing: 'blue.8',
  queued: 'violet.8',
  // volumes and snapshots
  available: 'teal.9',
  'in-use': 'cyan.9',
  creating: 'blue.8',
  attaching: 'blue.8',
  detaching: 'grape.8',
  extending: 'blue.8',
}

/** Transitional statuses: the console polls faster while an instance is in one. */
export const TRANSITIONAL = new Set(['pending', 'provisioning', 'starting', 'stopping', 'rebooting', 'resizing', 'deleting'])

export function StatusBadge({ status }: { status: string }) {
  return (
    <Badge color={COLORS[status] ?? 'gray.7'} variant="filled" autoContrast data-testid="status">
      {status}
    </Badge>
  )
}
