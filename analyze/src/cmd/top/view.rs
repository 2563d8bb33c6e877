//! The terminal view of `ioblame top`: ratatui over crossterm, redrawn each interval and on
//! each key, showing the rows of [`super::rows`]. Only the view enters it: `--batch` and
//! `--json` never take the terminal over.

use std::io::Stdout;
use std::time::{Duration, Instant};

use anyhow::Result;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{execute, terminal};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use super::model::{GroupBy, RowKey};
use super::rows::{fit, header, row_lines, summary, text_rows, Ctx, Shape, SortBy, TextRow};
use super::Span;

/// The view's state: the shape of the rows, the selection, what is open.
pub struct App {
    /// How rows are shown.
    pub shape: Shape,
    /// Rows kept while frozen.
    frozen: Option<Vec<TextRow>>,
    /// The selected row's key.
    selected: Option<RowKey>,
    list: ListState,
    /// Typing a filter.
    editing: bool,
    /// The panel shown over the rows (the selected row's stack, or its waits): its title
    /// and lines.
    stack: Option<(String, Vec<String>)>,
    /// The rows last drawn.
    rows: Vec<TextRow>,
    /// The interval shown last, and the run's length so far (ns).
    span: Option<Span>,
    run_ns: u64,
}

impl App {
    /// A view of rows grouped by `group`, sorted by `sort`.
    pub fn new(group: GroupBy, sort: SortBy) -> App {
        App {
            shape: Shape {
                group,
                sort,
                reverse: false,
                totals: false,
                filter: String::new(),
            },
            frozen: None,
            selected: None,
            list: ListState::default(),
            editing: false,
            stack: None,
            rows: Vec::new(),
            span: None,
            run_ns: 0,
        }
    }

    /// An interval ended.
    pub fn interval_done(&mut self, span: Span) {
        self.run_ns = span.start_ns + span.len_ns;
        self.span = Some(span);
    }

    /// Handles a key; true to quit.
    pub fn key(&mut self, code: KeyCode, mods: KeyModifiers, ctx: &mut Ctx<'_>) -> bool {
        if mods.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
            return true;
        }
        if self.editing {
            match code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.shape.filter.clear();
                }
                KeyCode::Backspace => {
                    self.shape.filter.pop();
                }
                KeyCode::Char(c) => self.shape.filter.push(c),
                _ => {}
            }
            return false;
        }
        if self.stack.is_some() {
            if matches!(code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) {
                self.stack = None;
            }
            return false;
        }
        match code {
            KeyCode::Char('q') => return true,
            KeyCode::Char('g') => self.shape.group = self.shape.group.next(),
            KeyCode::Char('G') => {
                for _ in 1..GroupBy::ALL.len() {
                    self.shape.group = self.shape.group.next();
                }
            }
            KeyCode::Char('s') | KeyCode::Right | KeyCode::Char('>') => {
                self.shape.sort = self.shape.sort.step(1)
            }
            KeyCode::Char('S') | KeyCode::Left | KeyCode::Char('<') => {
                self.shape.sort = self.shape.sort.step(-1)
            }
            KeyCode::Char(c @ '0'..='9') => {
                // 1 the first column, ..., 0 the tenth.
                let i = (c as u8 - b'0' + 9) % 10;
                if let Some(&s) = SortBy::ALL.get(i as usize) {
                    self.shape.sort = s;
                }
            }
            KeyCode::Char('r') => self.shape.reverse = !self.shape.reverse,
            KeyCode::Char('/') => {
                self.editing = true;
                self.shape.filter.clear();
            }
            KeyCode::Esc => self.shape.filter.clear(),
            KeyCode::Char(' ') | KeyCode::Char('f') => {
                self.frozen = match self.frozen {
                    Some(_) => None,
                    None => Some(self.rows.clone()),
                }
            }
            KeyCode::Tab | KeyCode::Char('t') => self.shape.totals = !self.shape.totals,
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(10),
            KeyCode::PageUp => self.move_by(-10),
            KeyCode::Enter => self.open_stack(ctx),
            KeyCode::Char('b') => self.open_waits(ctx),
            _ => {}
        }
        false
    }

    fn move_by(&mut self, by: isize) {
        if self.rows.is_empty() {
            return;
        }
        let i = self.list.selected().unwrap_or(0) as isize;
        let j = (i + by).clamp(0, self.rows.len() as isize - 1) as usize;
        self.list.select(Some(j));
        self.selected = Some(self.rows[j].key);
    }

    fn open_stack(&mut self, ctx: &mut Ctx<'_>) {
        let Some(row) = self.list.selected().and_then(|i| self.rows.get(i)) else {
            return;
        };
        let Some(b) = row.top else {
            return;
        };
        let mut lines = vec![
            format!("{} (pid {})  {}", row.comm, row.pid, row.intent),
            format!("file: {}", row.file),
            format!("cgroup: {}", row.cgroup),
            String::new(),
        ];
        let frames = ctx.model.stack_frames(b.stack);
        if frames.is_empty() {
            lines.push("no stack".into());
        }
        lines.extend(frames.iter().map(|&a| ctx.symbols.format_frame(a)));
        self.stack = Some((" stack (esc closes) ".into(), lines));
    }

    /// The selected row's waits: who waited behind its IO, and whom its IO waited behind,
    /// in the interval or the run, by task, most time first.
    fn open_waits(&mut self, ctx: &mut Ctx<'_>) {
        let Some(row) = self.list.selected().and_then(|i| self.rows.get(i)) else {
            return;
        };
        let sums = if self.shape.totals {
            &ctx.model.total
        } else {
            &ctx.model.interval
        };
        let (victims, culprits) = ctx
            .model
            .waits_of(sums, row.key, self.shape.group, ctx.tables);
        let who = |b: &super::model::Base| match ctx.tables.role(b.role) {
            Some(r) => format!("{} (pid {})", r.comm, r.pid),
            None => "-".into(),
        };
        let list = |title: &str, v: &[(super::model::Base, u64)], lines: &mut Vec<String>| {
            lines.push(title.into());
            if v.is_empty() {
                lines.push("  none".into());
            }
            // By task (the bases of one task summed), ten at most.
            let mut by: Vec<(String, u64)> = Vec::new();
            for (b, ns) in v {
                let k = who(b);
                match by.iter_mut().find(|x| x.0 == k) {
                    Some(x) => x.1 += ns,
                    None => by.push((k, *ns)),
                }
            }
            by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            for (k, ns) in by.iter().take(10) {
                lines.push(format!("  {:>10}  {k}", crate::cmd::blame::human_ns(*ns)));
            }
            if by.len() > 10 {
                let rest: u64 = by[10..].iter().map(|x| x.1).sum();
                lines.push(format!(
                    "  {:>10}  {} others",
                    crate::cmd::blame::human_ns(rest),
                    by.len() - 10
                ));
            }
        };
        let mut lines = vec![
            format!("{} (pid {})  {}", row.comm, row.pid, row.intent),
            format!("file: {}", row.file),
            String::new(),
        ];
        list("waited behind its IO:", &victims, &mut lines);
        lines.push(String::new());
        list("its IO waited behind:", &culprits, &mut lines);
        let when = if self.shape.totals {
            "the run"
        } else {
            "the interval"
        };
        self.stack = Some((format!(" waits in {when} (esc closes) "), lines));
    }

    /// Draws the screen.
    pub fn draw(&mut self, f: &mut Frame<'_>, ctx: &mut Ctx<'_>) {
        let area = f.area();
        let secs = if self.shape.totals {
            (self.run_ns.max(1_000_000)) as f64 / 1e9
        } else {
            self.span.map_or(1.0, |s| s.secs())
        };
        let rows = match &self.frozen {
            Some(r) => r.clone(),
            None => text_rows(ctx, &self.shape, secs),
        };
        ctx.names.refresh();
        self.rows = rows;
        // Keep the selection on the same row.
        let pos = self
            .selected
            .and_then(|k| self.rows.iter().position(|r| r.key == k));
        match pos {
            Some(i) => self.list.select(Some(i)),
            None if self.rows.is_empty() => self.list.select(None),
            None => {
                let i = self.list.selected().unwrap_or(0).min(self.rows.len() - 1);
                self.list.select(Some(i));
            }
        }
        let [top, head, body, foot] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(area);
        let sums = if self.shape.totals {
            &ctx.model.total.all
        } else {
            &ctx.model.interval.all
        };
        let mut title = format!(
            "ioblame top  by {}  {}",
            self.shape.group.name(),
            if self.shape.totals {
                format!("totals over {:.0}s", self.run_ns as f64 / 1e9)
            } else {
                match self.span {
                    Some(s) => format!("interval {} ({:.2}s)", s.number, s.secs()),
                    None => "waiting for the first interval".into(),
                }
            }
        );
        if self.frozen.is_some() {
            title.push_str("  FROZEN");
        }
        if self.shape.reverse {
            title.push_str("  reversed");
        }
        if !self.shape.filter.is_empty() || self.editing {
            title.push_str(&format!("  filter: {}", self.shape.filter));
            if self.editing {
                title.push('_');
            }
        }
        let status = match ctx.notes.last() {
            Some(n) => format!("{}  | {}", summary(sums, secs, self.shape.totals), n),
            None => summary(sums, secs, self.shape.totals),
        };
        f.render_widget(
            Paragraph::new(vec![
                Line::from(TextSpan::styled(
                    fit(&title, area.width as usize),
                    Style::new().add_modifier(Modifier::BOLD),
                )),
                Line::from(fit(&status, area.width as usize)),
            ]),
            top,
        );
        f.render_widget(
            Paragraph::new(Line::from(TextSpan::styled(
                fit(
                    &header(area.width, self.shape.totals, self.shape.sort),
                    area.width as usize,
                ),
                Style::new().add_modifier(Modifier::REVERSED),
            ))),
            head,
        );
        let items: Vec<ListItem> = self
            .rows
            .iter()
            .map(|r| {
                ListItem::new(
                    row_lines(r, area.width)
                        .into_iter()
                        .map(Line::from)
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let list = List::new(items).highlight_style(Style::new().add_modifier(Modifier::REVERSED));
        f.render_stateful_widget(list, body, &mut self.list);
        f.render_widget(
            Paragraph::new(fit(
                "q quit  g group  s sort  r reverse  / filter  space freeze  tab totals  enter stack  b waits",
                area.width as usize,
            )),
            foot,
        );
        if let Some((title, lines)) = &self.stack {
            let w = area.width.saturating_sub(4).max(10);
            let h = area.height.saturating_sub(4).max(5);
            // Within the screen, however small (or shrunk while it is open).
            let r = Rect::new(area.x + 2, area.y + 2, w, h).intersection(area);
            if r.is_empty() {
                return;
            }
            f.render_widget(Clear, r);
            f.render_widget(
                Paragraph::new(
                    lines
                        .iter()
                        .map(|l| Line::from(l.as_str()))
                        .collect::<Vec<_>>(),
                )
                .block(Block::default().borders(Borders::ALL).title(title.as_str()))
                .wrap(Wrap { trim: false }),
                r,
            );
        }
    }
}

/// The terminal while the view is drawn: raw mode, the alternate screen; restored when it
/// is dropped (and on a panic).
pub struct Terminal {
    term: ratatui::Terminal<CrosstermBackend<Stdout>>,
    app: App,
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(self.term.backend_mut(), terminal::LeaveAlternateScreen);
        let _ = self.term.show_cursor();
    }
}

impl Terminal {
    /// Takes the terminal over.
    pub fn enter(group: GroupBy, sort: SortBy) -> Result<Terminal> {
        terminal::enable_raw_mode()?;
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen) {
            let _ = terminal::disable_raw_mode();
            return Err(e.into());
        }
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = terminal::disable_raw_mode();
            let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen);
            hook(info);
        }));
        let term = ratatui::Terminal::new(CrosstermBackend::new(out))?;
        Ok(Terminal {
            term,
            app: App::new(group, sort),
        })
    }

    /// An interval ended.
    pub fn interval_done(&mut self, span: Span) {
        self.app.interval_done(span);
    }

    /// Draws the screen.
    pub fn draw(&mut self, mut ctx: Ctx<'_>) -> Result<()> {
        let app = &mut self.app;
        self.term.draw(|f| app.draw(f, &mut ctx))?;
        Ok(())
    }

    /// Handles keys until `deadline`, redrawing after each; true to quit.
    pub fn wait(&mut self, deadline: Instant, mut ctx: Ctx<'_>) -> Result<bool> {
        loop {
            if super::source::stop_requested() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let left = (deadline - now).min(Duration::from_millis(100));
            if event::poll(left)? {
                match event::read()? {
                    TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
                        if self.app.key(k.code, k.modifiers, &mut ctx) {
                            return Ok(true);
                        }
                        let app = &mut self.app;
                        self.term.draw(|f| app.draw(f, &mut ctx))?;
                    }
                    TermEvent::Resize(..) => {
                        let app = &mut self.app;
                        self.term.draw(|f| app.draw(f, &mut ctx))?;
                    }
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::top::model::tests::{io, reserved_intents, role};
    use crate::cmd::top::model::Model;
    use crate::cmd::top::names::Names;
    use ioblame_attrib::{
        Act, ActId, Dir, Dirtied, FileKey, Intent, IntentId, RoleId, Tables, Via, WbReason,
    };
    use ratatui::backend::TestBackend;

    const KALLSYMS: &str = "\
ffffffff81000000 T ksys_write
ffffffff81000100 T ext4_buffered_write_iter
ffffffff81000200 T generic_perform_write
ffffffff81000300 T __folio_mark_dirty
ffffffff81000400 T mark_buffer_dirty
ffffffff81000500 T kjournald2
ffffffff81000600 T jbd2_journal_commit_transaction
ffffffff81000700 T submit_bh
ffffffff81000800 T ksys_read
ffffffff81000900 T filemap_read
ffffffff81000a00 T page_cache_ra_order
";

    const DISK: u32 = 7 << 20;

    /// Two writers whose writeback a flusher issued, a journal, a reader, and bytes dirtied
    /// not yet written: one interval of a second.
    fn scene() -> (Model, Tables) {
        let mut t = Tables {
            roles: vec![
                role(4242, "writerA", 11),
                role(4243, "writerB", 12),
                role(311, "jbd2/loop0-8", 1),
                role(97, "kworker/u8:2", 1),
                role(4250, "reader", 11),
            ],
            ..Tables::default()
        };
        let page = vec![
            0xffffffff81000310,
            0xffffffff81000210,
            0xffffffff81000110,
            0xffffffff81000010,
        ];
        let buffer = vec![
            0xffffffff81000410,
            0xffffffff81000210,
            0xffffffff81000110,
            0xffffffff81000010,
        ];
        let journal = vec![0xffffffff81000710, 0xffffffff81000610, 0xffffffff81000510];
        let read = vec![0xffffffff81000a10, 0xffffffff81000910, 0xffffffff81000810];
        t.intents = reserved_intents();
        t.intents.extend([
            Intent {
                modifier: WbReason(1).modifier(),
                stack: page.clone(),
                user: Vec::new(),
            },
            Intent {
                modifier: WbReason(1).modifier(),
                stack: buffer.clone(),
                user: Vec::new(),
            },
            Intent {
                modifier: 0,
                stack: journal,
                user: Vec::new(),
            },
            Intent {
                modifier: 0,
                stack: read,
                user: Vec::new(),
            },
        ]);
        let act = |role: u32, intent: u32, ino: u64, via: Via| Act {
            role: RoleId(role),
            intent: IntentId(intent),
            file: FileKey { dev: DISK, ino },
            via,
            reason: None,
            issuer: None,
            recorder: false,
        };
        t.acts = vec![
            act(0, 2, 12, Via::Page),
            act(1, 3, 13, Via::Buffer),
            act(2, 4, 0, Via::Journal),
            act(4, 5, 14, Via::Issuer),
        ];
        let mut m = Model::new(false, None);
        for _ in 0..8 {
            m.add_io(&io(0, Dir::W, 1 << 20, 120, 2_500), &t);
        }
        for _ in 0..3 {
            m.add_io(&io(1, Dir::W, 512 << 10, 90, 4_100), &t);
        }
        m.add_io(&io(2, Dir::W, 16 << 10, 15, 800), &t);
        for _ in 0..40 {
            m.add_io(&io(3, Dir::R, 128 << 10, 30, 700), &t);
        }
        let dirtied = |role: u32, stack: u32, ino: u64, bytes: u64| Dirtied {
            role: RoleId(role),
            stack,
            via: Via::Page,
            dev: DISK,
            ino,
            pos: 0,
            buffer: false,
            bytes,
            time: 1,
        };
        m.add_dirtied(&dirtied(0, 1, 12, 6 << 20), &page, &t);
        m.add_dirtied(&dirtied(1, 2, 13, 3 << 20), &buffer, &t);
        // The reader waited behind writerA's writeback, the journal behind writerB's, and
        // writerA a little behind the reader.
        m.add_wait((ActId(3), ActId(0), DISK, 310_000_000), &t);
        m.add_wait((ActId(2), ActId(1), DISK, 20_000_000), &t);
        m.add_wait((ActId(0), ActId(3), DISK, 4_500_000), &t);
        (m, t)
    }

    fn names() -> Names {
        Names::fixed(
            &[
                ((DISK, 12), "/srv/db/wal/000001.log"),
                ((DISK, 13), "/srv/db/tables/orders.ibd"),
                ((DISK, 14), "/srv/www/static/bundle.js"),
            ],
            &[
                (1, "/"),
                (11, "/system.slice/db.service"),
                (12, "/system.slice/backup.service"),
            ],
            &[(DISK, "loop0")],
        )
    }

    fn screen(app: &mut App, w: u16, h: u16, keys: &[KeyCode]) -> String {
        let (model, tables) = scene();
        let mut names = names();
        let symbols = ioblame_decode::Symbolizer::from_kallsyms(KALLSYMS);
        let notes = Vec::new();
        let mut ctx = Ctx {
            model: &model,
            tables: &tables,
            names: &mut names,
            symbols: &symbols,
            notes: &notes,
        };
        app.interval_done(Span {
            number: 7,
            start_ns: 6_000_000_000,
            len_ns: 1_000_000_000,
        });
        let mut term = ratatui::Terminal::new(TestBackend::new(w, h)).unwrap();
        term.draw(|f| app.draw(f, &mut ctx)).unwrap();
        for &k in keys {
            app.key(k, KeyModifiers::NONE, &mut ctx);
            term.draw(|f| app.draw(f, &mut ctx)).unwrap();
        }
        let buf = term.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..h {
            let line: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    fn golden(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name)
    }

    /// The view on a phone-sized terminal and a wide one: every row names the writer, not
    /// the flusher that issued its IO (the kworker has none), sorted by device time.
    #[test]
    fn the_view_at_80x24_and_wide() {
        let mut app = App::new(GroupBy::Act, SortBy::DevTime);
        let narrow = screen(&mut app, 80, 24, &[]);
        assert!(
            narrow.contains("writerA") && !narrow.contains("kworker"),
            "{narrow}"
        );
        ioblame_testkit::assert_file(golden("top-80x24.txt"), &narrow);
        let mut app = App::new(GroupBy::Act, SortBy::DevTime);
        ioblame_testkit::assert_file(golden("top-160x30.txt"), screen(&mut app, 160, 30, &[]));
    }

    /// Keys: grouping by cgroup then sorting by bytes read, a filter, the stack of the
    /// selected row, totals.
    #[test]
    fn keys_regroup_sort_filter_and_open_the_stack() {
        let mut app = App::new(GroupBy::Act, SortBy::DevTime);
        let s = screen(
            &mut app,
            80,
            24,
            &[
                KeyCode::Char('g'),
                KeyCode::Char('g'),
                KeyCode::Char('g'),
                KeyCode::Char('3'),
            ],
        );
        assert_eq!(app.shape.group, GroupBy::Cgroup);
        assert_eq!(app.shape.sort, SortBy::Read);
        ioblame_testkit::assert_file(golden("top-by-cgroup.txt"), &s);
        let mut app = App::new(GroupBy::Act, SortBy::DevTime);
        let keys: Vec<KeyCode> = "/orders"
            .chars()
            .map(KeyCode::Char)
            .chain([KeyCode::Enter, KeyCode::Enter])
            .collect();
        let s = screen(&mut app, 80, 24, &keys);
        assert!(s.contains("mark_buffer_dirty"), "{s}");
        ioblame_testkit::assert_file(golden("top-stack.txt"), &s);
        // The stack on terminals too small for it: cut to the screen, no panic.
        for (w, h) in [(10, 3), (80, 6), (12, 7)] {
            let mut app = App::new(GroupBy::Act, SortBy::DevTime);
            screen(&mut app, w, h, &[KeyCode::Enter]);
        }
        let mut app = App::new(GroupBy::Task, SortBy::Write);
        let s = screen(&mut app, 80, 24, &[KeyCode::Tab, KeyCode::Char(' ')]);
        assert!(s.contains("FROZEN") && s.contains("totals"), "{s}");
        assert!(app.key(
            KeyCode::Char('q'),
            KeyModifiers::NONE,
            &mut Ctx {
                model: &Model::default(),
                tables: &Tables::default(),
                names: &mut names(),
                symbols: &ioblame_decode::Symbolizer::default(),
                notes: &[],
            }
        ));
    }

    /// Sorted by the time others waited behind each row (`8`), the top row is the writer
    /// the reader waited behind; `b` opens its waits: who waited behind it, and whom it
    /// waited behind.
    #[test]
    fn the_waits_behind_a_row() {
        let mut app = App::new(GroupBy::Task, SortBy::DevTime);
        let s = screen(&mut app, 80, 24, &[KeyCode::Char('8'), KeyCode::Char('b')]);
        assert_eq!(app.shape.sort, SortBy::Behind);
        assert!(
            s.contains("waited behind its IO") && s.contains("reader (pid 4250)"),
            "{s}"
        );
        ioblame_testkit::assert_file(golden("top-waits.txt"), &s);
        // `0` sorts by the tenth column.
        let mut app = App::new(GroupBy::Task, SortBy::DevTime);
        screen(&mut app, 80, 24, &[KeyCode::Char('0')]);
        assert_eq!(app.shape.sort, SortBy::Comm);
    }
}
