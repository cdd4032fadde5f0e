/** Containers that can hold the focus a vanished control leaves: a list's table, a form's section, a dialog. */
const HOMES = 'table, section, form, [role="dialog"], main'

/**
 * Keeps the keyboard's place when `control` (e.g. a row's Delete button, just confirmed) is disabled while its
 * request runs, or removed with its row: when the focus would fall to the page's body, it moves to the nearest
 * container `control` was in that is still on the page (its table, section, form or dialog, made focusable with
 * tabindex -1; the main region when the list itself went, e.g. for its empty state), and back onto `control` once
 * that is usable again. Stops when the person moves the focus or points elsewhere, when `control` has the focus
 * back, or after `timeoutMs`. Returns the function that stops it.
 */
export function keepFocusNear(control: HTMLElement, timeoutMs = 30_000): () => void {
  const homes: HTMLElement[] = []
  for (let node = control.parentElement; node; node = node.parentElement) if (node.matches(HOMES)) homes.push(node)
  let parked: HTMLElement | null = null

  const check = () => {
    const active = document.activeElement
    if (control.isConnected && !control.matches(':disabled')) {
      if (parked && active === parked) {
        control.focus()
        stop()
      }
      return
    }
    if (active && active !== document.body) return
    parked = homes.find((home) => home.isConnected) ?? null
    if (!parked) return stop()
    if (!parked.hasAttribute('tabindex')) parked.tabIndex = -1
    parked.focus()
  }
  const onFocusIn = (event: FocusEvent) => {
    const target = event.target as Node | null
    if (target !== control && target !== parked && !(target instanceof Element && target.closest('[role="dialog"]'))) stop()
  }
  const observer = new MutationObserver(check)
  observer.observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['disabled'] })
  document.addEventListener('focusin', onFocusIn)
  document.addEventListener('pointerdown', stop)
  const timer = window.setTimeout(stop, timeoutMs)
  function stop() {
    observer.disconnect()
    document.removeEventListener('focusin', onFocusIn)
    document.removeEventListener('pointerdown', stop)
    window.clearTimeout(timer)
  }
  return stop
}
