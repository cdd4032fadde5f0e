import { NumberInput, createTheme } from '@mantine/core'

// Mantine's defaults pass WCAG AA for text; the primary shade is one step darker so white-on-primary buttons do too.
export const theme = createTheme({
  primaryColor: 'indigo',
  primaryShade: { light: 7, dark: 5 },
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
  defaultRadius: 'md',
  // people who ask their system for less motion get none (modals and menus open without a transition)
  respectReducedMotion: true,
  components: {
    // A number outside a field's min/max is never rewritten on blur (70000 would silently become 65535 and a wider rule
    // would be created): the field keeps what was typed and the server's (or the form's) range error is shown instead.
    NumberInput: NumberInput.extend({ defaultProps: { clampBehavior: 'none' } }),
  },
})
