//! The manual's links, checked without a database: every relative link,
//! reference link and image of README.md, BENCHMARKS.md, CHANGELOG.md and
//! docs/*.md must lead to a file or directory of the repository, and its
//! `#fragment`, if it has one, to a heading of the page it names (the anchor
//! GitHub gives the heading) or to an `<a id="...">` or `<a name="...">`
//! there; a bare `#fragment` names the page it is on. A reference link whose
//! label has no definition is broken too. Links with a scheme (`https:`,
//! `mailto:`) are not followed.
//!
//! The pages are read with pulldown-cmark, as a renderer reads them, so that
//! what looks like a link in a code block or a code span is not one.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{BrokenLink, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pages whose links are checked, as paths from the root: README.md,
/// BENCHMARKS.md, CHANGELOG.md, then every docs/*.md in name order.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| Path::new("docs").join(entry.unwrap().file_name()))
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut pages = Vec::from(["README.md", "BENCHMARKS.md", "CHANGELOG.md"].map(PathBuf::from));
    pages.extend(docs);
    pages
}

/// What the check needs of a page.
#[derive(Default)]
struct Page {
    /// (line, destination) of every link and image, reference links resolved.
    links: Vec<(usize, String)>,
    /// The anchors a `#fragment` may name: its headings' and its `<a id>`s.
    anchors: BTreeSet<String>,
    /// (line, label) of every `[text][label]` or `[label][]` whose label has
    /// no definition (a renderer shows it as plain text).
    undefined: Vec<(usize, String)>,
}

/// The line of a byte offset, from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

fn parse<'a>(text: &'a str) -> Page {
    let mut page = Page::default();
    let mut undefined = Vec::new();
    let callback = |link: BrokenLink<'a>| -> Option<(CowStr<'a>, CowStr<'a>)> {
        // a shortcut `[word]` with no definition is just text in brackets
        if matches!(link.link_type, LinkType::Reference | LinkType::Collapsed) {
            undefined.push((link.span.start, link.reference.to_string()));
        }
        None
    };
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut heading: Option<String> = None;
    let mut occurrences = HashMap::new();
    let parser = Parser::new_with_broken_link_callback(text, options, Some(callback));
    for (event, range) in parser.into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let slug = github_slug(&heading.take().unwrap_or_default());
                page.anchors.insert(unique(&mut occurrences, slug));
            }
            Event::Text(part) | Event::Code(part) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&part);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                page.links
                    .push((line_of(text, range.start), dest_url.to_string()));
            }
            Event::Html(html) | Event::InlineHtml(html) => page.anchors.extend(html_anchors(&html)),
            _ => {}
        }
    }
    page.undefined = undefined
        .into_iter()
        .map(|(at, label)| (line_of(text, at), label))
        .collect();
    page
}

/// The anchor GitHub gives a heading (github-slugger's rule): in lower
/// case, spaces become hyphens, and only letters, digits, `_` and `-` stay.
fn github_slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchor of the next heading with this slug: the slug the first time,
/// then the slug with -1, -2, ... (any taken already skipped), as GitHub
/// numbers repeated headings.
fn unique(occurrences: &mut HashMap<String, usize>, slug: String) -> String {
    let mut anchor = slug.clone();
    while occurrences.contains_key(&anchor) {
        let n = occurrences.entry(slug.clone()).or_insert(0);
        *n += 1;
        anchor = format!("{slug}-{n}");
    }
    occurrences.insert(anchor.clone(), 0);
    anchor
}

/// The `id` and `name` values of the `<a>` tags in a piece of HTML.
fn html_anchors(html: &str) -> Vec<String> {
    html.split('<')
        .filter_map(|tag| tag.strip_prefix("a "))
        .flat_map(|rest| {
            rest.split('>')
                .next()
                .unwrap_or_default()
                .split_whitespace()
        })
        .filter_map(|attribute| {
            let attribute = attribute.trim_end_matches('/');
            let value = attribute
                .strip_prefix("id=")
                .or_else(|| attribute.strip_prefix("name="))?;
            Some(value.trim_matches('"').to_string())
        })
        .collect()
}

/// Whether a destination has a scheme (`https:`, `mailto:`) or is
/// protocol-relative: not a file of the repository.
fn external(dest: &str) -> bool {
    dest.starts_with("//")
        || dest.split_once(':').is_some_and(|(scheme, _)| {
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
}

/// `path`, as written in a link on `page`, as a path from the root (a
/// leading `/` starts at the root, as on GitHub); None when it leads out of
/// the repository.
fn resolve(page: &Path, path: &str) -> Option<PathBuf> {
    let joined = match path.strip_prefix('/') {
        Some(from_root) => PathBuf::from(from_root),
        None => page.parent().unwrap_or(Path::new("")).join(path),
    };
    let mut resolved = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::Normal(name) => resolved.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !resolved.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(resolved)
}

/// The page at `path` (from the root), parsed once.
fn load<'c>(root: &Path, path: &Path, parsed: &'c mut HashMap<PathBuf, Page>) -> &'c Page {
    parsed.entry(path.to_path_buf()).or_insert_with(|| {
        let text = std::fs::read_to_string(root.join(path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        parse(&text)
    })
}

/// What is wrong with the link `dest` on `page`, if anything.
fn problem(
    root: &Path,
    page: &Path,
    dest: &str,
    parsed: &mut HashMap<PathBuf, Page>,
) -> Option<String> {
    if external(dest) {
        return None;
    }
    let (path, fragment) = dest.split_once('#').unwrap_or((dest, ""));
    let path = path.split_once('?').map_or(path, |(path, _query)| path);
    let target = if path.is_empty() {
        page.to_path_buf()
    } else {
        match resolve(page, path) {
            Some(target) => target,
            None => return Some("leads out of the repository".to_string()),
        }
    };
    if !root.join(&target).exists() {
        return Some(format!("{} does not exist", target.display()));
    }
    if fragment.is_empty() {
        return None;
    }
    if target.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "{} is not a Markdown page, so it has no #{fragment}",
            target.display()
        ));
    }
    if load(root, &target, parsed).anchors.contains(fragment) {
        return None;
    }
    Some(format!(
        "{} has no heading or <a id> whose anchor is #{fragment}",
        target.display()
    ))
}

/// Every broken link of `pages` (paths from `root`), as `page:line: link:
/// what is wrong`.
fn check(root: &Path, pages: &[PathBuf]) -> Vec<String> {
    let mut parsed = HashMap::new();
    let mut problems = Vec::new();
    for page in pages {
        let (links, undefined) = {
            let this = load(root, page, &mut parsed);
            (this.links.clone(), this.undefined.clone())
        };
        for (line, dest) in links {
            if let Some(why) = problem(root, page, &dest, &mut parsed) {
                problems.push(format!("{}:{line}: {dest}: {why}", page.display()));
            }
        }
        for (line, label) in undefined {
            problems.push(format!(
                "{}:{line}: [{label}]: no link reference definition of that name",
                page.display()
            ));
        }
    }
    problems
}

#[test]
fn every_relative_link_leads_to_a_file_and_a_heading() {
    let root = root();
    let pages = pages(&root);
    assert!(pages.len() > 3, "docs/ has pages: {pages:?}");
    let problems = check(&root, &pages);
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

/// The check itself, on a repository of two pages made for it: each kind
/// of broken link is reported once, and nothing else.
#[test]
fn the_check_reports_each_kind_of_broken_link() {
    let dir = std::env::temp_dir().join(format!("queue-docs-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(
        dir.join("README.md"),
        r##"# Front page

## Two words

[fine](docs/a.md#a-heading), [also fine](docs/a.md#queue_resume), [here](#two-words),
[web](https://example.com/x#y), ![image](docs/a.md), [ref][good], [again][Good]

[missing file](docs/b.md), [missing anchor](docs/a.md#nowhere), [here too](#nothing),
[out](../x.md), [not a page](docs/#x), ![missing image](pic.png), [ref][bad]

`[in code](docs/b.md)`

    [indented code](docs/b.md)

[good]: docs/a.md#a-heading-1
"##,
    )
    .unwrap();
    std::fs::write(
        dir.join("docs/a.md"),
        r##"# A heading

<a id="queue_resume"></a>

## A heading

```text
[in a code block](nowhere.md)
```

[back](../README.md#front-page), [dup](#a-heading-1), [bad dup](#a-heading-2)
"##,
    )
    .unwrap();
    let problems = check(
        &dir,
        &[PathBuf::from("README.md"), PathBuf::from("docs/a.md")],
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        problems,
        [
            "README.md:8: docs/b.md: docs/b.md does not exist",
            "README.md:8: docs/a.md#nowhere: docs/a.md has no heading or <a id> whose anchor is #nowhere",
            "README.md:8: #nothing: README.md has no heading or <a id> whose anchor is #nothing",
            "README.md:9: ../x.md: leads out of the repository",
            "README.md:9: docs/#x: docs is not a Markdown page, so it has no #x",
            "README.md:9: pic.png: pic.png does not exist",
            "README.md:9: [bad]: no link reference definition of that name",
            "docs/a.md:11: #a-heading-2: docs/a.md has no heading or <a id> whose anchor is #a-heading-2",
        ]
    );
}

/// Anchors as GitHub makes them, for headings of these pages.
#[test]
fn anchors_are_the_ones_github_makes() {
    for (heading, anchor) in [
        (
            "Webhooks: delivery to a local receiver (make bench-webhooks)",
            "webhooks-delivery-to-a-local-receiver-make-bench-webhooks",
        ),
        ("queue.webhook_allow", "queuewebhook_allow"),
        (
            "What the sender gets and what its outcome means",
            "what-the-sender-gets-and-what-its-outcome-means",
        ),
        ("Results at 2,000 jobs/s", "results-at-2000-jobss"),
    ] {
        assert_eq!(github_slug(heading), anchor);
    }
}
